package systest

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/monarch-go/monarch/internal/testenv"
)

// held is a run of a held job (see holdArgs): its procs stay until it is
// stopped.
type held struct {
	cmd    *exec.Cmd
	stderr *testenv.SyncBuffer
	job    string
	done   chan struct{} // closed once the process has been waited for
}

// startHold runs argv (monarch local -- holdArgv, or holdArgv itself) with
// extra environment and waits (bounded) until it holds (see startUntil).
func startHold(t *testing.T, env []string, argv ...string) *held {
	t.Helper()
	return startUntil(t, env, argv, isHolding)
}

// startUntil runs argv with env added, reads its stdout until ready says
// so (within 90 s) and finds the job's id: from MONARCH_JOB when env sets
// it, else from the launcher's first line. The process is killed at the
// test's end if it still runs.
func startUntil(t testing.TB, env, argv []string, ready func(line string) bool) *held {
	t.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), env...)
	h := &held{cmd: cmd, stderr: &testenv.SyncBuffer{}, done: make(chan struct{})}
	cmd.Stderr = h.stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); <-h.done })
	timer := time.AfterFunc(90*time.Second, func() { cmd.Process.Kill() })
	defer timer.Stop()
	sc := bufio.NewScanner(out)
	ok := false
	for !ok && sc.Scan() {
		ok = ready(sc.Text())
	}
	go func() {
		for sc.Scan() {
		}
		cmd.Wait()
		close(h.done)
	}()
	if !ok {
		t.Fatalf("%v did not get ready; stderr:\n%s", argv, h.stderr.String())
	}
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "MONARCH_JOB="); ok {
			h.job = v
		}
	}
	if h.job == "" {
		m := regexp.MustCompile(`monarch: job (\S+):`).FindStringSubmatch(h.stderr.String())
		if m == nil {
			t.Fatalf("no job id on stderr:\n%s", h.stderr.String())
		}
		h.job = m[1]
	}
	return h
}

// wait waits (bounded) for the process to end and returns its status.
func (h *held) wait(t *testing.T) int {
	t.Helper()
	select {
	case <-h.done:
	case <-time.After(30 * time.Second):
		t.Fatalf("job %s still running 30s after it was stopped; stderr:\n%s", h.job, h.stderr.String())
	}
	return h.cmd.ProcessState.ExitCode()
}

// statusRows runs monarch status and returns its rows by job, each a map
// from column name to value (columns are cut where the header's are).
func statusRows(t *testing.T) (map[string]map[string]string, string) {
	t.Helper()
	out, stderr, code := monarch(t, "status")
	if code != 0 {
		t.Fatalf("status: exit %d: %s", code, stderr)
	}
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	header := lines[0]
	var names []string
	var starts []int
	for _, m := range regexp.MustCompile(`\S+`).FindAllStringIndex(header, -1) {
		names, starts = append(names, header[m[0]:m[1]]), append(starts, m[0])
	}
	rows := map[string]map[string]string{}
	for _, line := range lines[1:] {
		if !strings.HasPrefix(line, " ") && len(line) > starts[len(starts)-1] {
			row := map[string]string{}
			for i, name := range names {
				end := len(line)
				if i+1 < len(starts) {
					end = starts[i+1]
				}
				row[name] = strings.TrimSpace(line[starts[i]:end])
			}
			rows[row["JOB"]] = row
		}
	}
	return rows, out
}

// waitStatus polls monarch status (bounded) until job's row has want.
func waitStatus(t *testing.T, job string, want map[string]string) map[string]string {
	t.Helper()
	var out string
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		var rows map[string]map[string]string
		rows, out = statusRows(t)
		row, ok := rows[job]
		match := ok
		for k, v := range want {
			match = match && row[k] == v
		}
		if match {
			return row
		}
		if time.Now().After(deadline) {
			t.Fatalf("status of %s never had %v within 30s:\n%s", job, want, out)
		}
	}
}

// TestStatusLocalJob: while a job runs, status shows the hosts and procs
// up now; a job ended by monarch stop shows as stopped, with the most
// hosts and procs it had.
func TestStatusLocalJob(t *testing.T) {
	t.Setenv("MONARCH_STATE_DIR", t.TempDir())
	h := startHold(t, nil, append([]string{filepath.Join(build(t), "monarch"), "local", "--hosts", "2", "--"}, holdArgv(t)...)...)
	waitStatus(t, h.job, map[string]string{"STATE": "running", "SCHEDULER": "local", "HOSTS": "2", "PROCS": "4"})
	out, stderr, code := monarch(t, "stop", h.job)
	if code != 0 {
		t.Fatalf("stop: exit %d: %s", code, stderr)
	}
	// It says what it did and how the job ended (issue 40: it said
	// nothing), and, asked again, that the job had ended.
	if want := regexp.MustCompile(`^stopped job ` + h.job + `: 4 procs ended, the client exited 143 at [-0-9]+ [:0-9]+\n$`); !want.MatchString(out) {
		t.Errorf("stop: stdout %q, want it to match %s", out, want)
	}
	if code := h.wait(t); code != 143 {
		t.Errorf("monarch local exited %d after stop, want 143", code)
	}
	waitStatus(t, h.job, map[string]string{"STATE": "stopped by monarch stop", "HOSTS": "2", "PROCS": "4"})
	out, stderr, code = monarch(t, "stop", h.job)
	if want := "monarch: stop " + h.job + ": job " + h.job + " had already ended: stopped by monarch stop, 4 procs ended, the client exited 143 at "; code != 1 || out != "" || !strings.HasPrefix(stderr, want) {
		t.Errorf("stop again: exit %d, stdout %q, stderr %q; want exit 1 and %q...", code, out, stderr, want)
	}
}

// TestStatusDirectRun: a program run without a launcher is listed too,
// with its pid, counts and log; killed, it shows as lost, not running;
// stopped, as stopped.
func TestStatusDirectRun(t *testing.T) {
	state := t.TempDir()
	t.Setenv("MONARCH_STATE_DIR", state)
	hosts := testenv.WriteFile(t, t.TempDir(), "hosts.toml", "scheduler = \"local\"\n[local]\nhosts = 1\n")
	a := startHold(t, []string{"MONARCH_JOB=directa", "MONARCH_HOSTS=" + hosts}, holdArgv(t)...)
	b := startHold(t, []string{"MONARCH_JOB=directb", "MONARCH_HOSTS=" + hosts}, holdArgv(t)...)
	waitStatus(t, "directa", map[string]string{"STATE": "running", "SCHEDULER": "direct", "HOSTS": "1", "PROCS": "2",
		"PID": strconv.Itoa(a.cmd.Process.Pid)})
	out, _, code := monarch(t, "status", "directa")
	if code != 0 || !regexp.MustCompile(`(?m)^log: +`+regexp.QuoteMeta(filepath.Join(state, "directa.log"))+`$`).MatchString(out) ||
		!strings.Contains(out, "pid:         "+strconv.Itoa(a.cmd.Process.Pid)+" on ") {
		t.Errorf("status directa: exit %d:\n%s", code, out)
	}
	// The simulated host of a hosts file run directly is h0 in the log.
	for deadline := time.Now().Add(20 * time.Second); strings.Count(out, "stepping on") < 2; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("logs directa --host h0 printed no 2 lines within 20s:\n%s", out)
		}
		out, _, _ = monarch(t, "logs", "directa", "--host", "h0")
	}
	a.cmd.Process.Kill() // no chance to record its end
	a.wait(t)
	waitStatus(t, "directa", map[string]string{"STATE": "lost", "HOSTS": "1", "PROCS": "2"})
	waitStatus(t, "directb", map[string]string{"STATE": "running"})
	if _, stderr, code := monarch(t, "stop", "directb"); code != 0 {
		t.Fatalf("stop: exit %d: %s", code, stderr)
	}
	b.wait(t)
	waitStatus(t, "directb", map[string]string{"STATE": "stopped"})
}

// TestClean removes what the store keeps of ended jobs, and nothing of a
// running one; status says how much the store takes.
func TestClean(t *testing.T) {
	state, syslogs := t.TempDir(), t.TempDir()
	t.Setenv("MONARCH_STATE_DIR", state)
	t.Setenv("MONARCH_SYSLOG_DIR", syslogs)
	hosts := testenv.WriteFile(t, t.TempDir(), "hosts.toml", "scheduler = \"local\"\n[local]\nhosts = 1\n")
	running := startHold(t, []string{"MONARCH_JOB=stillrunning", "MONARCH_HOSTS=" + hosts}, holdArgv(t)...)
	if _, _, code := monarch(t, "local", "--", "sh", "-c", "exit 3"); code != 3 {
		t.Fatalf("exit %d, want 3", code)
	}
	rows, out := statusRows(t)
	var ended string
	for job, row := range rows {
		if row["STATE"] == "failed (exit 3)" {
			ended = job
		}
	}
	if ended == "" {
		t.Fatalf("no failed job in status:\n%s", out)
	}
	if !regexp.MustCompile(`(?m)^job store ` + regexp.QuoteMeta(state) + `: 2 jobs, [0-9.]+ (B|KiB)`).MatchString(out) {
		t.Errorf("no usage footer:\n%s", out)
	}
	// The system logs of both jobs, and a log left without a record.
	for _, f := range []string{"monarch_" + ended + "_client.log", "monarch_stillrunning_client.log"} {
		testenv.WriteFile(t, syslogs, f, "a system log line\n")
	}
	testenv.WriteFile(t, state, "orphan.log", `{"t":"2026-12-02T10:00:00Z","k":"start","job":"orphan","h":"x","pid":1}`+"\n"+`{"t":"2026-12-02T10:00:01Z","k":"end"}`+"\n")

	out, stderr, code := monarch(t, "clean", "--older-than", "1h")
	if code != 0 || !strings.HasPrefix(out, "nothing to clean") {
		t.Errorf("clean --older-than 1h: exit %d: %s%s", code, out, stderr)
	}
	out, stderr, code = monarch(t, "clean")
	if code != 0 || !strings.Contains(out, "removed "+ended+" (failed (exit 3)): 2 files") ||
		!strings.Contains(out, "removed orphan (log only): 1 files") || !strings.Contains(out, "freed ") || strings.Contains(out, "stillrunning") {
		t.Fatalf("clean: exit %d:\n%s%s", code, out, stderr)
	}
	for _, p := range []string{filepath.Join(state, ended+".json"), filepath.Join(syslogs, "monarch_"+ended+"_client.log"), filepath.Join(state, "orphan.log")} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("%s not removed (%v)", p, err)
		}
	}
	for _, p := range []string{filepath.Join(state, "stillrunning.json"), filepath.Join(state, "stillrunning.log"), filepath.Join(syslogs, "monarch_stillrunning_client.log")} {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("a running job's file is gone: %v", err)
		}
	}
	running.cmd.Process.Signal(syscall.SIGTERM)
	running.wait(t)
	waitStatus(t, "stillrunning", map[string]string{"STATE": "stopped"})
	// A control socket left behind (its client killed) goes too.
	testenv.WriteFile(t, state, "stillrunning.sock", "")
	// Its record, log and client system log at least (its procs may have
	// left system logs of their own, on a loaded machine).
	if out, _, _ := monarch(t, "clean"); !regexp.MustCompile(`removed stillrunning \(stopped\): [3-9] files`).MatchString(out) {
		t.Errorf("clean after the end:\n%s", out)
	}
	for _, p := range []string{filepath.Join(state, "stillrunning.json"), filepath.Join(state, "stillrunning.log"), filepath.Join(syslogs, "monarch_stillrunning_client.log"), filepath.Join(state, "stillrunning.sock")} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("%s not removed (%v)", p, err)
		}
	}
	if _, _, code := monarch(t, "clean", "--older-than", "soon"); code == 0 {
		t.Error("a bad age was taken")
	}
}

// TestCleanRunLeavesNoSystemLogs: a run that has nothing to report makes
// no system log file (it used to leave one per process, all empty).
func TestCleanRunLeavesNoSystemLogs(t *testing.T) {
	build(t)
	tmp := t.TempDir()
	t.Setenv("MONARCH_STATE_DIR", t.TempDir())
	t.Setenv("TMPDIR", tmp)
	t.Setenv("MONARCH_SYSLOG_DIR", "") // the default: $TMPDIR/$USER
	out, stderr, code := monarch(t, "local", "--hosts", "2", "--", filepath.Join(build(t), "multihost"))
	if code != 0 || strings.Count(out, "taking a step") != 8 {
		t.Fatalf("exit %d\n%s\n%s", code, out, stderr)
	}
	var logs []string
	filepath.WalkDir(tmp, func(p string, d os.DirEntry, err error) error {
		if err == nil && strings.HasPrefix(d.Name(), "monarch_") {
			logs = append(logs, p)
		}
		return nil
	})
	if len(logs) > 0 {
		t.Errorf("a clean run left %d system log files: %v", len(logs), logs)
	}
}
