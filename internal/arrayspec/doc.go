// Package arrayspec reads and writes sbatch's job array syntax, the SPEC of
// `--array SPEC` and of a job file's [array] spec: comma-separated parts,
// each an index ("7"), a range ("0-15") or a range with a step ("0-15:4"),
// optionally followed by "%N", at most N tasks at once ("0-15%4").
//
// It follows Slurm 22.05's rules: indices run from 0 to MaxArraySize-1
// (Slurm's MaxArraySize, 1001 by default), a step is at least 1, and parts
// that overlap are merged, as sbatch's bitmap merges them. Unlike sbatch it
// refuses a range written backwards ("5-3") instead of reading it as empty,
// since such a range is always a typo. Parse never allocates more than the
// bound allows, however large the numbers it is given.
package arrayspec
