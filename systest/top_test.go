package systest

import (
	"context"
	"fmt"
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

// monarch top is tested as it is used: in a terminal, here tmux's, which
// the test drives (send-keys) and reads (capture-pane). Debian's tmux is
// installed by testdata/tmux/setup.sh when missing (root); where it cannot
// be, the tmux test skips, or fails under MONARCH_REQUIRE_CLUSTER=1.

// requireTmux makes sure tmux runs here.
func requireTmux(t *testing.T) {
	t.Helper()
	testenv.Require(t, "tmux", "testdata/tmux/setup.sh")
}

// tmuxServer is a tmux server of the test's own (its own socket: a
// user's tmux is never touched), killed when the test ends.
type tmuxServer struct {
	sock string
}

func newTmux(t *testing.T) *tmuxServer {
	t.Helper()
	dir := t.TempDir()
	if len(dir) > 90 { // a socket's path has at most 107 bytes
		var err error
		if dir, err = os.MkdirTemp("/tmp", "mtop"); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
	}
	s := &tmuxServer{sock: filepath.Join(dir, "tmux.sock")}
	t.Cleanup(func() { s.tmux("kill-server") })
	return s
}

// tmux runs a tmux command on the server, bounded.
func (s *tmuxServer) tmux(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "tmux", append([]string{"-S", s.sock, "-f", "/dev/null"}, args...)...)
	cmd.Env = append(os.Environ(), "TMUX=") // inside a user's tmux too
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("tmux %s: %v: %s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// session starts a session named name, 160x50, running argv (monarch
// and its arguments) with the test's environment, then a line saying how
// it exited and whether the terminal was left raw; the pane stays.
func (s *tmuxServer) session(t *testing.T, name string, argv ...string) {
	t.Helper()
	var env []string
	for _, k := range []string{"HOME", "TMPDIR", "MONARCH_STATE_DIR", "MONARCH_SYSLOG_DIR", "MONARCH_TESTENV", "MONARCH_JOB_PREFIX"} {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, shellQuote(k+"="+v))
		}
	}
	for i := range argv {
		argv[i] = shellQuote(argv[i])
	}
	// tmux's server has the environment of the client that started it:
	// the test's is passed on the command line.
	cmdline := "env " + strings.Join(env, " ") + " " + strings.Join(argv, " ") + "; echo TOP-EXITED $?; " +
		"if stty -a | grep -q -- -icanon; then echo TTY-RAW; else echo TTY-COOKED; fi; exec sleep 300"
	if out, err := s.tmux("new-session", "-d", "-s", name, "-x", "160", "-y", "50", cmdline); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// capture is what session name's pane shows.
func (s *tmuxServer) capture(t *testing.T, name string) string {
	t.Helper()
	out, err := s.tmux("capture-pane", "-p", "-t", name)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// display is a tmux format of session name's pane.
func (s *tmuxServer) display(t *testing.T, name, format string) string {
	t.Helper()
	out, err := s.tmux("display-message", "-p", "-t", name, format)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(out)
}

// until captures session name's pane until ok holds (bounded: a minute)
// and returns that capture.
func (s *tmuxServer) until(t *testing.T, name, what string, ok func(pane string) bool) string {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		pane := s.capture(t, name)
		if ok(pane) {
			return pane
		}
		if time.Now().After(deadline) {
			t.Fatalf("the pane of %s shows no %s within a minute; the last capture:\n%s", name, what, pane)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// paneRow is the row of the table under the section whose title begins
// with title whose first cell is first, split in fields (nil if none).
func paneRow(pane, title, first string) []string {
	in := false
	for _, l := range strings.Split(pane, "\n") {
		if !strings.HasPrefix(l, " ") {
			in = strings.HasPrefix(l, title)
			continue
		}
		if f := strings.Fields(l); in && len(f) > 0 && f[0] == first {
			return f
		}
	}
	return nil
}

// memberSent is member rank's count of calls sent, as the pane of top
// shows the actor mesh pingers (-1: not shown). Its columns: RANK PROC
// HOST STATE SENT SENT/S HANDLED HANDLED/S REASON.
func memberSent(pane string, rank int) int {
	f := paneRow(pane, "pingers: actor mesh", strconv.Itoa(rank))
	if len(f) < 8 {
		return -1
	}
	n, err := strconv.Atoi(f[4])
	if err != nil {
		return -1
	}
	return n
}

// TestTop: monarch top of a real job (the feed program: 2 hosts of 2
// procs, member 1 of pingers failed, member 0 called on and on) in a
// tmux terminal shows its meshes, the failure with its reason, counts
// that grow, a proc killed as failed; q quits and restores the terminal
// (no alternate screen, cursor shown, not raw). A top watching the job
// as it ends says so and exits 0. Without a terminal it prints one
// snapshot; a job that does not exist, one that ended and an interval
// too short are errors.
func TestTop(t *testing.T) {
	requireTmux(t)
	state := t.TempDir()
	t.Setenv("MONARCH_STATE_DIR", state)
	run, pids := startFeedJob(t)
	job, bin := run.job, filepath.Join(build(t), "monarch")

	// No terminal: one snapshot, in plain text.
	out, stderr, code := monarch(t, "top", job)
	if code != 0 || !strings.HasPrefix(out, "job "+job+"  ") || !strings.Contains(out, "\nworkers: proc mesh {hosts: 2, gpus: 2}, 4 procs (4 running)\n") ||
		!strings.Contains(out, "\npingers: actor mesh of Pinger {hosts: 2, gpus: 2}, owner c, 4 members (3 running, 1 failed)") {
		t.Errorf("top without a terminal: exit %d, %s\n%s", code, stderr, out)
	}
	if f := paneRow(out, "pingers: actor mesh", "1"); len(f) < 9 || f[3] != "failed" || !strings.Contains(strings.Join(f[8:], " "), "feedTestFailure: failed on purpose") {
		t.Errorf("top without a terminal, member 1: %q\n%s", f, out)
	}
	// The mesh's sent is its members' SENT summed.
	if m, sum := regexp.MustCompile(`\npingers: actor mesh .*; sent (\d+) \(`).FindStringSubmatch(out), memberSent(out, 0)+memberSent(out, 1)+memberSent(out, 2)+memberSent(out, 3); m == nil || m[1] != strconv.Itoa(sum) {
		t.Errorf("top without a terminal: pingers' sent %q, its members' SENT sum to %d\n%s", m, sum, out)
	}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"nosuchjob"}, `top: no job "nosuchjob"`},
		{[]string{job, "--interval", "50ms"}, "top: --interval 50ms: want 100ms to 1m"},
	} {
		_, stderr, code := monarch(t, append([]string{"top"}, tt.args...)...)
		if code != 1 || !strings.Contains(stderr, tt.want) {
			t.Errorf("top %v: exit %d, stderr %q; want 1 and %q", tt.args, code, stderr, tt.want)
		}
	}

	tm := newTmux(t)
	tm.session(t, "a", bin, "top", job)
	pane := tm.until(t, "a", "the meshes workers and pingers, member 1 failed with its reason", func(pane string) bool {
		f := paneRow(pane, "pingers: actor mesh", "1")
		return strings.Contains(pane, "\nworkers: proc mesh ") && memberSent(pane, 0) >= 0 &&
			len(f) >= 9 && f[3] == "failed" && strings.Contains(strings.Join(f[8:], " "), "feedTestFailure")
	})
	if on := tm.display(t, "a", "#{alternate_on}"); on != "1" {
		t.Errorf("top runs, alternate_on %q; want 1", on)
	}
	sent := memberSent(pane, 0)
	tm.until(t, "a", fmt.Sprintf("member 0's sent count above %d", sent), func(pane string) bool {
		return memberSent(pane, 0) > sent
	})

	// A proc that is killed: RANK HOST PID STATE ... in workers.
	if err := syscall.Kill(pids[3], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	tm.until(t, "a", "workers 3 and pingers[3] failed", func(pane string) bool {
		p, m := paneRow(pane, "workers: proc mesh", "3"), paneRow(pane, "pingers: actor mesh", "3")
		return len(p) >= 4 && p[2] == strconv.Itoa(pids[3]) && p[3] == "failed" && len(m) >= 4 && m[3] == "failed"
	})

	// q quits; the terminal is as it was.
	if _, err := tm.tmux("send-keys", "-t", "a", "q"); err != nil {
		t.Fatal(err)
	}
	pane = tm.until(t, "a", "top's exit", func(pane string) bool { return strings.Contains(pane, "TTY-") })
	if !strings.Contains(pane, "TOP-EXITED 0\nTTY-COOKED") || strings.Contains(pane, "pingers") {
		t.Errorf("after q:\n%s", pane)
	}
	if on, cursor := tm.display(t, "a", "#{alternate_on}"), tm.display(t, "a", "#{cursor_flag}"); on != "0" || cursor != "1" {
		t.Errorf("after q: alternate_on %q, cursor_flag %q; want 0 and 1", on, cursor)
	}

	// A job that ends while top watches it.
	tm.session(t, "b", bin, "top", "--interval", "200ms")
	tm.until(t, "b", "the job", func(pane string) bool { return strings.Contains(pane, "\npingers: actor mesh ") })
	if _, stderr, code := monarch(t, "stop", job); code != 0 {
		t.Fatalf("stop: exit %d: %s", code, stderr)
	}
	run.wait(t)
	pane = tm.until(t, "b", "top's exit", func(pane string) bool { return strings.Contains(pane, "TTY-") })
	if !regexp.MustCompile(`(?m)^top: job ` + job + ` ended \(.+\): monarch logs ` + job + ` shows its output\nTOP-EXITED 0\nTTY-COOKED$`).MatchString(pane) {
		t.Errorf("top of a job that ended:\n%s", pane)
	}

	_, stderr, code = monarch(t, "top", job)
	if code != 1 || !strings.Contains(stderr, "top: job "+job+" has ended (") || !strings.Contains(stderr, "monarch logs "+job) {
		t.Errorf("top of an ended job: exit %d, stderr %q", code, stderr)
	}
	checkNothingLeft(t, filepath.Join(build(t), "feed"))
}
