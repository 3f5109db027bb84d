package cli

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
)

// TestConfigCheck runs `monarch config check` in-process, on the
// repository's example files.
func TestConfigCheck(t *testing.T) {
	good, err := filepath.Abs("../../hostsconfig/testdata/good")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args []string
		out  string // the whole output
		err  string // the whole error
	}{
		{
			name: "hosts file",
			args: []string{"../../testdata/hosts-local.toml"},
			out: "../../testdata/hosts-local.toml: valid MONARCH_HOSTS file\n" +
				"scheduler local: 2 simulated hosts on this machine\n" +
				"bus: listens on 127.0.0.1:0 (any free port), workers dial 127.0.0.1\n" +
				"tls: off: every link is on this machine's loopback (tls = true turns it on)\n" +
				"health: a heartbeat every 1s; a host silent 5s is suspected, and lost once its link is down (at once if its agent ends, after 3s unanswered if its host or the network is down) or after 30s silent\n",
		},
		{
			name: "job file",
			args: []string{"../../hostsconfig/testdata/good/job-full.toml"},
			out: "../../hostsconfig/testdata/good/job-full.toml: valid job file\n" +
				"program: /bin/sh\n" +
				"args: -c \"echo hello\"\n" +
				"dir: " + good + "\n" +
				"env: OMP_NUM_THREADS, B_FIRST, A_SECOND\n" +
				"procs per host: {b: 2, a: 3}\n" +
				"log: procs' output not streamed to the client, similar lines aggregated over 3s, file level DEBUG, stderr level ERROR\n" +
				"hosts: " + filepath.Join(good, "local.toml") + "\n" +
				"  scheduler local: 3 simulated hosts on this machine\n" +
				"  bus: listens on 127.0.0.1:0 (any free port), workers dial 127.0.0.1\n" +
				"  tls: off: every link is on this machine's loopback (tls = true turns it on)\n" +
				"  health: a heartbeat every 1s; a host silent 5s is suspected, and lost once its link is down (at once if its agent ends, after 3s unanswered if its host or the network is down) or after 30s silent\n",
		},
		{
			name: "slurm hosts file",
			args: []string{"../../testdata/hosts-slurm.toml"},
			out: "../../testdata/hosts-slurm.toml: valid MONARCH_HOSTS file\n" +
				"scheduler slurm: 2 nodes in partition debug, time 01:00:00, account proj, 4 GPUs per node (salloc, or sbatch with --detach), then one srun step with one monarch agent per node\n" +
				"  inside an allocation: one srun step over all of its nodes\n" +
				"  srun and salloc wait at most 30s for resources (--immediate)\n" +
				"  extra salloc and sbatch arguments: --qos=high\n" +
				"  extra srun arguments: --mpi=none\n" +
				"  monarch binary on the nodes: /opt/monarch/bin/monarch\n" +
				"  program: sent by sbcast to the nodes that lack it (not cached, nor at its path in folders only you can write: copied from there), into the cache ~/.cache/monarch/bin ($XDG_CACHE_HOME/monarch/bin if set); monarch: the one at its path there\n" +
				"bus: listens on 0.0.0.0:0 (any free port), workers dial 10.213.7.1\n" +
				"tls: on (the hosts are not this machine), TLS 1.3 on every link to the hub with a CA made for the job; leaves and routes show its certificates; the agents get the token over their TLS link once MUNGE proves they run as you, not in srun's environment\n" +
				"health: a heartbeat every 1s; a host silent 5s is suspected, and lost once its link is down (at once if its agent ends, after 3s unanswered if its host or the network is down) or after 30s silent\n",
		},
		{
			name: "error with line and key",
			args: []string{"../../hostsconfig/testdata/bad/hosts-unknown-key.toml"},
			err:  `../../hostsconfig/testdata/bad/hosts-unknown-key.toml:7: slurm.nodez: unknown key (did you mean "nodes"?)`,
		},
		{
			name: "several errors",
			args: []string{"../../hostsconfig/testdata/bad/job-typo.toml"},
			err: "../../hostsconfig/testdata/bad/job-typo.toml: program: required key missing\n" +
				`../../hostsconfig/testdata/bad/job-typo.toml:4: progam: unknown key (did you mean "program"?)`,
		},
		{
			name: "missing file",
			args: []string{"../../testdata/nothere.toml"},
			err:  "../../testdata/nothere.toml: no such file or directory",
		},
		{
			name: "no file",
			args: nil,
			err:  "config check: missing FILE\nusage: monarch config check FILE",
		},
		{
			name: "two files",
			args: []string{"a.toml", "b.toml"},
			err:  "config check: too many arguments: \"b.toml\"\nusage: monarch config check FILE",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			newApp(&out, &errOut).run(context.Background(), append([]string{"monarch", "config", "check"}, tt.args...))
			if got := strings.TrimPrefix(strings.TrimSpace(errOut.String()), "monarch: "); got != tt.err {
				t.Errorf("error:\n%s\nwant:\n%s", got, tt.err)
			}
			if got := out.String(); got != tt.out {
				t.Errorf("output:\n%s\nwant:\n%s", got, tt.out)
			}
		})
	}
}
