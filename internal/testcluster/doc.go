// Package testcluster gives tests a real Slurm 22.05 cluster and real sshd's
// to launch on: two hosts, h1 and h2, made of network, UTS and mount
// namespaces on this machine (own IP address, own hostname, own /etc/hosts),
// started by testdata/cluster/start.sh and stopped by testdata/cluster/stop.sh.
//
// # Usage
//
//	func TestMain(m *testing.M) {
//		code := m.Run()
//		testcluster.StopIfStarted()
//		os.Exit(code)
//	}
//
//	func TestOnTwoHosts(t *testing.T) {
//		c := testcluster.Get(t) // skips where the cluster cannot run
//		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
//		defer cancel()
//		out, err := c.Command(ctx, "srun", "-N2", "hostname").Output() // h1, h2
//		...
//		out, err = c.SSH(ctx, "h2", "hostname").Output() // h2
//	}
//
// Slurm commands need c.Env (SLURM_CONF) in their environment; ssh needs
// -F c.SSHConfig. Workers on h1/h2 reach this machine at c.Advertise (the
// machine's short hostname and "vm" resolve to it inside the hosts), never
// at 127.0.0.1. The ssh host "lo" is an sshd on 127.0.0.1 of this machine.
// The hosts see this machine's filesystem but for their own mounts:
// c.HostTmpfs(t, "h2", dir, "1m") gives h2 a disk of its own at dir.
//
// # Another user
//
// c.Other is an unprivileged user of the hosts who is not the job's (start.sh
// creates it, stop.sh removes it). c.AsOther(ctx, "h2", "sh", "-c", ...)
// runs a command as that user on a host ("" for this machine): what another
// user of a shared cluster can do there, for tests that plant files, squat
// folders, flood ports or read ps.
//
// # Packet capture
//
// c.Capture(t, "h1") records every frame on h1's link (its veth, from
// this machine's side) until Stop, for tests that must show that a secret
// never crosses the network in the clear: cp.Contains(secret) looks in
// each frame and in the TCP byte streams put back together from them, so
// a secret cut across segments is found too. Where frames were lost (the
// 512 MiB limit, kernel drops) and the secret was not found, Contains
// fails the test: absence cannot be shown then. cp.Frames and cp.Bytes
// tell that the capture saw traffic at all.
//
// # Where it runs
//
// The cluster needs root (namespaces, daemons). Get skips the test when it
// cannot run here: not root, or start.sh exits with status 3 (packages
// missing and not root, no namespaces). With MONARCH_REQUIRE_CLUSTER=1 those
// cases fail the test instead, so CI cannot pass by skipping. As root,
// start.sh installs the Debian packages it needs (slurmctld, slurmd,
// slurm-client, munge, openssh-server) on first use.
//
// # Lifetime
//
// Get runs start.sh once per test binary; start.sh returns at once when the
// cluster is already up and healthy, so test binaries of several packages
// share one cluster. Each process that got the cluster holds a shared lock
// on $BASE/users.lock until StopIfStarted, which stops the cluster only if
// no other process still holds that lock: the last user stops it. This also
// stops a cluster that was already running before the tests (started by
// hand); set MONARCH_KEEP_CLUSTER=1 to leave it running.
//
// The cluster lives under MONARCH_CLUSTER_BASE (default /tmp/monarch-cluster).
// The other knobs of start.sh (SUBNET, NS_PREFIX, ports, ...) are passed
// through from the environment; see testdata/cluster/README.md.
package testcluster
