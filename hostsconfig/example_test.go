package hostsconfig_test

import (
	"fmt"

	"github.com/monarch-go/monarch/hostsconfig"
)

func ExampleLoadHosts() {
	h, err := hostsconfig.LoadHosts("testdata/good/ssh.toml")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(h.Describe())
	// Output:
	// scheduler ssh: 2 hosts (h1, h2) as root, port 22, up to 16 sessions at once; a monarch agent per host over ssh
	//   each connection attempt bounded to 5s, options StrictHostKeyChecking=no
	//   monarch binary on the hosts: the launcher's own path
	//   program and monarch: sent by the ssh session to the hosts that lack them (not cached, nor at their paths in folders only you can write: copied from there), into the cache ~/.cache/monarch/bin ($XDG_CACHE_HOME/monarch/bin if set)
	// bus: listens on 0.0.0.0:0 (any free port), workers dial 10.213.7.1
	// tls: on (the hosts are not this machine), TLS 1.3 on every link to the hub with a CA made for the job; leaves and routes show its certificates; the agents get the token over ssh
	// health: a heartbeat every 1s; a host silent 5s is suspected, and lost once its link is down (at once if its agent ends, after 3s unanswered if its host or the network is down) or after 30s silent
}

func ExampleLoadHosts_error() {
	_, err := hostsconfig.LoadHosts("testdata/bad/hosts-unknown-key.toml")
	fmt.Println(err)
	// Output:
	// testdata/bad/hosts-unknown-key.toml:7: slurm.nodez: unknown key (did you mean "nodes"?)
}

func ExampleHosts_Describe() {
	h := &hostsconfig.Hosts{
		Scheduler: hostsconfig.SchedulerSlurm,
		Slurm:     &hostsconfig.Slurm{Nodes: 2, Partition: "debug", Time: "01:00:00", Immediate: hostsconfig.DefaultSlurmImmediate},
		Bus:       hostsconfig.Bus{Listen: "0.0.0.0:0"},
	}
	fmt.Println(h.Describe())
	// Output:
	// scheduler slurm: 2 nodes in partition debug, time 01:00:00 (salloc, or sbatch with --detach), then one srun step with one monarch agent per node
	//   inside an allocation: one srun step over all of its nodes
	//   srun and salloc wait at most 30s for resources (--immediate)
	//   monarch binary on the nodes: the launcher's own path
	//   program and monarch: sent by sbcast to the nodes that lack them (not cached, nor at their paths in folders only you can write: copied from there), into the cache ~/.cache/monarch/bin ($XDG_CACHE_HOME/monarch/bin if set)
	// bus: listens on 0.0.0.0:0 (any free port), workers dial an address of this host chosen at launch
	// tls: on (the hosts are not this machine), TLS 1.3 on every link to the hub with a CA made for the job; leaves and routes show its certificates; the agents get the token over their TLS link once MUNGE proves they run as you, not in srun's environment
	// health: a heartbeat every 1s; a host silent 5s is suspected, and lost once its link is down (at once if its agent ends, after 3s unanswered if its host or the network is down) or after 30s silent
}
