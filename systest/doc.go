// Package systest holds monarch's whole-system tests: they build the
// monarch binary, the examples and the test programs (testprogs/) and run
// them as users do, as real processes on this machine, over ssh and under
// Slurm on the test cluster (internal/testcluster). The command's own unit
// tests, which run it in-process, are in internal/cli.
//
// The tests run from the repository's root (TestMain changes to it), so
// that the files they use are named as users name them: testdata/,
// examples/, README.md and docs/, the go build paths ./testprogs/....
//
// The cluster tests skip where the cluster cannot start, with the reason;
// MONARCH_REQUIRE_CLUSTER=1 (CI) turns the skip into a failure.
package systest
