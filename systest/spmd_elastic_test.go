package systest

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/monarch-go/monarch/internal/testcluster"
	"github.com/monarch-go/monarch/internal/testenv"
)

// Elastic SPMD jobs ([spmd] nnodes, monarch local --nnodes MIN:MAX, as
// torchrun's --nnodes): 2 or 3 hosts x 2 ranks, whose ranks say where
// they are and wait on their first attempt; a host is taken (its agent
// SIGKILLed, or stopped) once the 4 have spoken.

// elasticRank is the ranks' command: each says its rank, world, group
// attempt and host, then waits (60 s on the first attempt: until the test
// takes its host; 2 s on the next). It execs the wait, though a shell's
// child would go with a host agent SIGKILLed too (its keeper:
// TestAgentKilledLeavesNothing).
const elasticRank = `echo "rank $RANK of $WORLD_SIZE group $GROUP_RANK of $GROUP_WORLD_SIZE attempt $TORCHELASTIC_RESTART_COUNT port $MASTER_PORT on ${MONARCH_HOST_NAME:-$(hostname)}"; ` +
	`[ "$TORCHELASTIC_RESTART_COUNT" = 0 ] && exec sleep 60.41; exec sleep 2.41`

var elasticLine = regexp.MustCompile(`rank (\d+) of (\d+) group (\d+) of (\d+) attempt (\d+) port (\d+) on (h\d+)$`)

// loseAgent runs monarch with args in env (a job of hosts x 2 ranks
// running elasticRank or the all-reduce with HOLD, 4 ranks on its first
// attempt), calls lose with the launcher's pid once the first attempt's
// ranks have spoken, to take a host, and returns the job's output, its
// ranks' lines by attempt, and its exit status.
func loseAgent(t *testing.T, env []string, lose func(launcher int), args ...string) (stdout, stderr string, attempts map[string][]string, code int) {
	t.Helper()
	cmd, out, errb := startMonarch(t, env, args...)
	for deadline := time.Now().Add(time.Minute); len(ranksSaid(out.String())["0"]) < 4; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the first attempt's 4 ranks did not speak within a minute\nstdout:\n%s\nstderr:\n%s", out, errb)
		}
	}
	lose(cmd.Process.Pid)
	code = waitExit(t, cmd, 2*time.Minute, errb)
	return out.String(), errb.String(), ranksSaid(out.String()), code
}

// goesOn runs loseAgent, and checks that the job went on (Run said
// line) and ended 0; it returns its output and its ranks' lines by
// attempt.
func goesOn(t *testing.T, env []string, lose func(launcher int), line string, args ...string) (stdout, stderr string, attempts map[string][]string) {
	t.Helper()
	out, stderr, attempts, code := loseAgent(t, env, lose, args...)
	if code != 0 {
		t.Fatalf("exit %d, want 0: the job goes on\nstdout:\n%s\nstderr:\n%s", code, out, stderr)
	}
	if !strings.Contains(stderr, line+"\n") {
		t.Errorf("no line\n%s\nin:\n%s", line, stderr)
	}
	return out, stderr, attempts
}

// killAgent SIGKILLs the agent of simulated host index.
func killAgent(t *testing.T, index int) func(launcher int) {
	return func(launcher int) { syscall.Kill(localAgent(t, launcher, index), syscall.SIGKILL) }
}

// h1Lost is Run's line when the second of 2 hosts x 2 ranks (%s: h1 of
// simulated hosts, h2 of the cluster's) is lost and the job goes on, with
// 1 restart at most.
const h1Lost = "monarch: host %s lost (ranks 2, 3 ended); going on with 1 of 2 hosts (min 1): restarting 2 ranks (restart 1 of 1)"

// ranksSaid is the ranks' lines in out, by attempt.
func ranksSaid(out string) map[string][]string {
	attempts := map[string][]string{}
	for _, line := range strings.Split(out, "\n") {
		if m := elasticLine.FindStringSubmatch(line); m != nil {
			attempts[m[5]] = append(attempts[m[5]], m[0])
		}
	}
	return attempts
}

// TestSPMDElasticHostLost: with --nnodes 1:2 the loss of h1 stops every
// rank and starts the gang again on h0 alone: 2 ranks renumbered 0 and 1
// of world size 2, one group, a new MASTER_PORT, restart count 1 (a
// restart, counted against --max-restarts as torchrun counts it); Run
// says so on one line, and the job ends 0 when they do; monarch status
// lists the restart as the host's loss. Nothing is left.
func TestSPMDElasticHostLost(t *testing.T) {
	out, stderr, attempts := goesOn(t, nil, killAgent(t, 1), fmt.Sprintf(h1Lost, "h1"),
		"local", "--hosts", "2", "--procs", "gpus=2", "--nnodes", "1:2", "--max-restarts", "1", "--", "sh", "-c", elasticRank)
	var ports []string
	for _, line := range attempts["0"] {
		ports = append(ports, elasticLine.FindStringSubmatch(line)[6])
	}
	got := map[string]bool{}
	for _, line := range attempts["1"] {
		m := elasticLine.FindStringSubmatch(line)
		got[m[1]] = true
		if m[2] != "2" || m[3] != "0" || m[4] != "1" || m[7] != "h0" {
			t.Errorf("%q: want world 2, group 0 of 1, on h0", line)
		}
		if strings.Contains(strings.Join(ports, " "), m[6]) {
			t.Errorf("%q: the restart kept MASTER_PORT %s", line, m[6])
		}
	}
	if len(attempts["1"]) != 2 || !got["0"] || !got["1"] || len(attempts) != 2 {
		t.Errorf("attempts %v: want ranks 0 and 1 on the second, and no third\n%s", attempts, out)
	}
	id := regexp.MustCompile(`monarch: job (\S+):`).FindStringSubmatch(stderr)
	if id == nil {
		t.Fatalf("no job id in:\n%s", stderr)
	}
	status, serr, code := localMonarch(t, time.Minute, nil, "status", id[1])
	if code != 0 || !regexp.MustCompile(`(?m)^ +restart 1 at \d\d:\d\d:\d\d: host h1 lost \(ranks 2, 3 ended\); going on with 1 of 2 hosts$`).MatchString(status) {
		t.Errorf("monarch status %s: exit %d, want the restart for the host lost:\n%s%s", id[1], code, status, serr)
	}
	checkNothingLeft(t, "sleep 60.41")
	checkNothingLeft(t, "sleep 2.41")
}

// TestSPMDElasticWaitingHost: of 3 hosts, nnodes 1:2 runs the ranks on
// h0 and h1; when h0 (rank 0's host: the rendezvous's) is lost, h2,
// waiting, takes its place: the gang starts again on h1 and h2, 4 ranks
// renumbered 0 to 3 in 2 groups, with a new rendezvous.
func TestSPMDElasticWaitingHost(t *testing.T) {
	out, _, attempts := goesOn(t, nil, killAgent(t, 0), "monarch: host h0 lost (ranks 0, 1 ended); going on with 2 of 2 hosts (min 1): restarting 4 ranks (restart 1 of 2)",
		"local", "--hosts", "3", "--procs", "gpus=2", "--nnodes", "1:2", "--max-restarts", "2", "--", "sh", "-c", elasticRank)
	if len(attempts["0"]) != 4 || len(attempts["1"]) != 4 || len(attempts) != 2 {
		t.Fatalf("attempts %v: want 4 ranks on each of 2\n%s", attempts, out)
	}
	port := elasticLine.FindStringSubmatch(attempts["0"][0])[6]
	seen := map[int]bool{}
	for _, line := range attempts["1"] {
		m := elasticLine.FindStringSubmatch(line)
		rank, _ := strconv.Atoi(m[1])
		if rank > 3 || seen[rank] {
			t.Errorf("%q: want each of ranks 0 to 3 once", line)
			continue
		}
		seen[rank] = true
		host := []string{"h1", "h1", "h2", "h2"}[rank]
		if m[2] != "4" || m[3] != strconv.Itoa(rank/2) || m[4] != "2" || m[6] == port || m[7] != host {
			t.Errorf("%q: want world 4, group %d of 2, a MASTER_PORT other than %s, on %s", line, rank/2, port, host)
		}
	}
	checkNothingLeft(t, "sleep 60.41")
	checkNothingLeft(t, "sleep 2.41")
}

// TestSPMDElasticCannotGoOn: the same loss fails the job, naming the
// host and why, when the hosts left are fewer than MIN (nnodes 2:2 in
// the job file; and the default: every host) or no restart is left to go
// on with (max_restarts 0); monarch status says the host was lost.
func TestSPMDElasticCannotGoOn(t *testing.T) {
	for _, tt := range []struct {
		name, spmd, why string
	}{
		{"below min", "nnodes = \"2:2\"\nmax_restarts = 1\n", "1 host left, fewer than MIN (nnodes 2:2)"},
		{"every host", "max_restarts = 1\n", "1 host left, fewer than MIN (nnodes 2:2)"},
		{"no restart left", "nnodes = \"1:2\"\n", "going on with 1 of 2 hosts needs a restart, and none is left (max_restarts 0)"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			testenv.WriteFile(t, dir, "hosts.toml", "scheduler = \"local\"\n[local]\nhosts = 2\n")
			job := testenv.WriteFile(t, dir, "job.toml", "hosts = \"hosts.toml\"\n\n[spmd]\ncommand = [\"sh\", \"-c\", '"+elasticRank+"']\n"+tt.spmd+"\n[procs]\ngpus = 2\n")
			out, stderr, attempts, code := loseAgent(t, nil, killAgent(t, 1), "local", job)
			if code != 1 {
				t.Fatalf("exit %d, want 1\nstdout:\n%s\nstderr:\n%s", code, out, stderr)
			}
			want := "monarch: host h1 lost (ranks 2, 3 ended): " + tt.why + "; the other 2 ranks were stopped\n"
			if !strings.Contains(stderr, want) || strings.Contains(stderr, "restarting") || len(attempts) != 1 {
				t.Errorf("want the job failed, not restarted, with\n%sstdout:\n%s\nstderr:\n%s", want, out, stderr)
			}
			id := regexp.MustCompile(`monarch: job (\S+):`).FindStringSubmatch(stderr)
			if id == nil {
				t.Fatalf("no job id in:\n%s", stderr)
			}
			status, serr, code := localMonarch(t, time.Minute, nil, "status", id[1])
			if code != 0 || !strings.Contains(status, "host h1 lost (ranks 2, 3 ended)") {
				t.Errorf("monarch status %s: exit %d, want the host lost:\n%s%s", id[1], code, status, serr)
			}
			checkNothingLeft(t, "sleep 60.41")
		})
	}
}

// TestSPMDNNodesBad: a bad nnodes is refused before anything starts,
// naming where: the job file's line (by config check, monarch local and
// monarch run), --nnodes (a usage error), or MAX beyond the hosts the
// job has (--hosts, or $MONARCH_HOSTS when the job file names none:
// then the job's client says so).
func TestSPMDNNodesBad(t *testing.T) {
	dir := t.TempDir()
	job := testenv.WriteFile(t, dir, "job.toml", "[spmd]\ncommand = [\"true\"]\nnnodes = \"2:1\"\n")
	checkRefused(t, job, job+`:3: spmd.nnodes: want MIN no more than MAX, got "2:1"`)
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"local", "--procs", "gpus=2", "--nnodes", "one", "--", "true"}, `--nnodes: want MIN:MAX hosts, such as "1:4", or a number of hosts, got "one"`},
		{[]string{"local", "--hosts", "2", "--procs", "gpus=2", "--nnodes", "1:3", "--", "true"}, "nnodes 1:3: MAX is more than the 2 hosts of the job (--hosts)"},
		{[]string{"local", "--nnodes", "1:2", "--", "true"}, "--nnodes sets the hosts of an SPMD job: give --procs, or a job file with [spmd]"},
	} {
		_, stderr, code := localMonarch(t, time.Minute, nil, tt.args...)
		if code != 2 || !strings.Contains(stderr, tt.want) {
			t.Errorf("monarch %s: exit %d, want 2 and %q:\n%s", strings.Join(tt.args, " "), code, tt.want, stderr)
		}
	}
	hosts := testenv.WriteFile(t, dir, "hosts.toml", "scheduler = \"local\"\n[local]\nhosts = 1\n")
	job = testenv.WriteFile(t, dir, "wide.toml", "[spmd]\ncommand = [\"true\"]\nnnodes = \"1:2\"\n")
	_, stderr, code := localMonarch(t, time.Minute, []string{"MONARCH_HOSTS=" + hosts}, "run", job)
	if want := "spmd: nnodes 1:2: the job has 1 host, fewer than MAX"; code != 1 || !strings.Contains(stderr, want) {
		t.Errorf("monarch run with 1 host: exit %d, want 1 and %q:\n%s", code, want, stderr)
	}
}

// TestClusterSPMDElastic: the same over ssh on the test cluster's two
// hosts, with nnodes 1:2 in the job file: h2's agent SIGKILLed, the job
// goes on with h1's 2 ranks (world 2) and ends 0; nothing is left on
// either host.
func TestClusterSPMDElastic(t *testing.T) {
	c := testcluster.Get(t)
	dir := t.TempDir()
	testenv.WriteFile(t, dir, "hosts.toml", fmt.Sprintf("scheduler = \"ssh\"\n[ssh]\nhosts = [%q, %q]\nconfig_file = %q\n", c.Hosts[0], c.Hosts[1], c.SSHConfig))
	job := testenv.WriteFile(t, dir, "job.toml", "hosts = \"hosts.toml\"\n\n[spmd]\ncommand = [\"sh\", \"-c\", '"+elasticRank+"']\nnnodes = \"1:2\"\nmax_restarts = 1\n\n[procs]\ngpus = 2\n")
	kill := func(int) {
		for _, p := range ourProcs("monarch agent") {
			// The agent itself, not the ssh session holding it.
			if runs(t, p.Cmdline, filepath.Join(build(t), "monarch")) && strings.Contains(p.Cmdline, " agent ") && strings.Contains(p.Cmdline, " --index 1 ") {
				syscall.Kill(p.PID, syscall.SIGKILL)
				return
			}
		}
		t.Fatalf("no agent of h2 among %v", ourProcs("monarch agent"))
	}
	build(t) // not timed
	start := time.Now()
	out, _, attempts := goesOn(t, c.Env, kill, fmt.Sprintf(h1Lost, "h2"), "run", job)
	for _, line := range attempts["1"] {
		if m := elasticLine.FindStringSubmatch(line); m[2] != "2" || m[7] != "h1" {
			t.Errorf("%q: want world 2, on h1", line)
		}
	}
	if len(attempts["1"]) != 2 || len(attempts) != 2 {
		t.Errorf("attempts %v: want 2 ranks on the second, and no third\n%s", attempts, out)
	}
	t.Logf("SPMD job of 2 cluster hosts x 2 ranks, h2's agent killed, gone on with h1: %v in all", time.Since(start).Round(time.Millisecond))
	checkNothingLeft(t, "sleep 60.41")
}

// TestSPMDElasticTorch: the PyTorch all-reduce on 2 local hosts x 2
// ranks, nnodes 1:2, whose first attempt all-reduces on and on (HOLD)
// when h1's agent is SIGKILLed: h0's ranks fail in their collective, their
// peers gone, and may be heard first; still the host's loss is what Run
// reports, and the gang starts again on h0, whose 2 ranks all-reduce
// (world 2) and end 0.
func TestSPMDElasticTorch(t *testing.T) {
	python, script := requireTorch(t)
	torchGoesOn(t, killAgent(t, 1), python, script)
}

// torchGoesOn runs the all-reduce on 2 local hosts x 2 ranks, nnodes
// 1:2, holding its first attempt until lose takes h1; it checks that the
// gang went on with h0, whose 2 ranks all-reduced in a world of 2, and
// that nothing is left.
func torchGoesOn(t *testing.T, lose func(launcher int), python, script string) {
	t.Helper()
	out, _, _ := goesOn(t, nil, lose, fmt.Sprintf(h1Lost, "h1"), "local", "--hosts", "2", "--procs", "gpus=2", "--nnodes", "1:2", "--max-restarts", "1", "--", "env", "HOLD=60", python, script)
	var second []string
	for _, line := range strings.Split(out, "\n") {
		if m := sumLine.FindStringSubmatch(line); m != nil && m[2] == "2" {
			second = append(second, line)
			if m[3] != m[4] {
				t.Errorf("%s: want the expected sum", line)
			}
		}
	}
	if len(second) != 2 {
		t.Errorf("%d ranks all-reduced in a world of 2, want 2:\n%s", len(second), out)
	}
	checkNothingLeft(t, script)
}

// TestSPMDElasticWedgedHostTorch: h1's agent stopped (SIGSTOP: silent,
// its link up, lost only after lost_after, 30 s) and its ranks killed:
// h0's ranks fail in their collective and are heard first, long before
// h1 is lost; the gang still goes on with h0 as for a host lost, not a
// rank's failure restarting the 4 ranks (whose spawn would fail on h1).
func TestSPMDElasticWedgedHostTorch(t *testing.T) {
	python, script := requireTorch(t)
	wedge := func(launcher int) {
		agent := localAgent(t, launcher, 1)
		syscall.Kill(agent, syscall.SIGSTOP)
		t.Cleanup(func() { syscall.Kill(agent, syscall.SIGCONT) })
		for _, rank := range childrenOf(agent) {
			if !isKeeper(rank) {
				syscall.Kill(rank, syscall.SIGKILL)
			}
		}
	}
	torchGoesOn(t, wedge, python, script)
}
