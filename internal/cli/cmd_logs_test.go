package cli

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/monarch-go/monarch/internal/testenv"
	"github.com/monarch-go/monarch/logagg"
)

var logsT0 = time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)

// logsLines: ranks 0-3 on node0/node1, every 5th line on stderr, one line
// every 100ms.
func logsLines(n int, t0 time.Time) []logagg.Line {
	var lines []logagg.Line
	for i := range n {
		s := logagg.Stdout
		if i%5 == 4 {
			s = logagg.Stderr
		}
		lines = append(lines, logagg.Line{
			Time: t0.Add(time.Duration(i) * 100 * time.Millisecond), Host: fmt.Sprintf("node%d", i%4/2),
			Proc: fmt.Sprintf("h%d-%d", i%4/2, i%2), Rank: i % 4, Stream: s, Text: fmt.Sprintf("step %d loss=0.%d", i, i),
		})
	}
	return lines
}

func logsWriteJob(t *testing.T, dir, job string, lines []logagg.Line) {
	t.Helper()
	w, err := logagg.NewWriter(dir, job, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range lines {
		w.Write(l)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

func runLogsCmd(ctx context.Context, args ...string) (stdout, stderr string, err error) {
	var out, errw testenv.SyncBuffer
	a := newApp(&out, &errw)
	err = a.cli.RunContext(ctx, a.commandLine(append([]string{"monarch", "logs"}, args...)))
	return out.String(), errw.String(), err
}

func TestLogsReplay(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("MONARCH_STATE_DIR", dir)
	logsWriteJob(t, dir, "old", logsLines(3, logsT0))
	os.Chtimes(filepath.Join(dir, "old.log"), time.Time{}, time.Now().Add(-time.Hour))
	logsWriteJob(t, dir, "j1", logsLines(20, logsT0))
	var stdout, stderr []string
	for _, l := range logsLines(20, logsT0) {
		if l.Stream == logagg.Stderr {
			stderr = append(stderr, logagg.FormatLine(l, false)+"\n")
		} else {
			stdout = append(stdout, logagg.FormatLine(l, false)+"\n")
		}
	}
	for _, args := range [][]string{{"j1"}, {}, {"--raw"}, {"j1", "-f"}, {"-f", "--", "j1"}} {
		out, errOut, err := runLogsCmd(context.Background(), args...)
		if err != nil {
			t.Fatalf("logs %v: %v", args, err)
		}
		if out != strings.Join(stdout, "") || errOut != strings.Join(stderr, "") {
			t.Errorf("logs %v:\nstdout %q\nstderr %q", args, out, errOut)
		}
	}
}

func TestLogsFilters(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("MONARCH_STATE_DIR", dir)
	logsWriteJob(t, dir, "j", logsLines(20, logsT0))
	logsWriteJob(t, dir, "now", []logagg.Line{
		{Time: time.Now().Add(-20 * time.Minute), Stream: logagg.Stdout, Text: "old"},
		{Time: time.Now().Add(-time.Minute), Stream: logagg.Stdout, Text: "new"},
	})
	tests := []struct {
		args     []string
		out, err string
	}{
		{[]string{"j", "--rank", "1", "--rank", "2"}, "[1] step 1 loss=0.1\n[2] step 2 loss=0.2\n[1] step 5 loss=0.5\n[2] step 6 loss=0.6\n[2] step 10 loss=0.10\n[1] step 13 loss=0.13\n[1] step 17 loss=0.17\n[2] step 18 loss=0.18\n", "[1] step 9 loss=0.9\n[2] step 14 loss=0.14\n"},
		{[]string{"--host", "node1", "--stream", "stderr", "j"}, "", "[2] step 14 loss=0.14\n[3] step 19 loss=0.19\n"},
		{[]string{"j", "--grep", `^step 1[12] `}, "[3] step 11 loss=0.11\n[0] step 12 loss=0.12\n", ""},
		{[]string{"j", "--since", "2026-12-02T10:00:01.8Z", "--stream=stdout"}, "[2] step 18 loss=0.18\n", ""},
		{[]string{"now", "--since", "10m"}, "[0] new\n", ""},
	}
	for _, tt := range tests {
		out, errOut, err := runLogsCmd(context.Background(), tt.args...)
		if err != nil {
			t.Errorf("logs %v: %v", tt.args, err)
			continue
		}
		if out != tt.out || errOut != tt.err {
			t.Errorf("logs %v:\nstdout %q, want %q\nstderr %q, want %q", tt.args, out, tt.out, errOut, tt.err)
		}
	}
}

func TestLogsAggregate(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("MONARCH_STATE_DIR", dir)
	var lines []logagg.Line
	add := func(at time.Duration, rank int, s logagg.Stream, text string) {
		lines = append(lines, logagg.Line{Time: logsT0.Add(at), Host: "h", Proc: "p", Rank: rank, Stream: s, Text: text})
	}
	for i := range 10 { // window 1: 0-2.7s
		add(time.Duration(i)*300*time.Millisecond, i%4, logagg.Stdout, fmt.Sprintf("step %d loss=0.%d", i, i))
	}
	add(time.Second, 2, logagg.Stderr, "warning: slow")
	add(2*time.Second, 3, logagg.Stdout, "epoch 1 done")
	for i := range 5 { // window 2: from 5s
		add(5*time.Second+time.Duration(i)*100*time.Millisecond, i, logagg.Stdout, fmt.Sprintf("step %d loss=0.%d", 10+i, i))
	}
	logsWriteJob(t, dir, "a", lines)
	out, errOut, err := runLogsCmd(context.Background(), "a", "--aggregate", "3s")
	if err != nil {
		t.Fatal(err)
	}
	wantOut := "[10 similar log lines] [0] step 0 loss=0.0\n[3] epoch 1 done\n[5 similar log lines] [0] step 10 loss=0.0\n"
	if out != wantOut || errOut != "[2] warning: slow\n" {
		t.Errorf("stdout %q\nwant   %q\nstderr %q", out, wantOut, errOut)
	}
}

// While following, windows close on wall time: groups appear without
// waiting for the job to end, and the command returns when it does.
func TestLogsFollowAggregate(t *testing.T) {
	// The command watches for Ctrl-C: the signal package's goroutine, once
	// started, stays for good; start it before counting.
	_, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	stop()
	before := runtime.NumGoroutine()
	dir := t.TempDir()
	t.Setenv("MONARCH_STATE_DIR", dir)
	w, err := logagg.NewWriter(dir, "live", 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	w.Flush()
	var out, errw testenv.SyncBuffer
	a := newApp(&out, &errw)
	done := make(chan error, 1)
	go func() {
		done <- a.cli.Run(a.commandLine([]string{"monarch", "logs", "live", "-f", "--aggregate", "300ms"}))
	}()
	for i := range 6 {
		w.Write(logagg.Line{Time: time.Now(), Rank: i, Stream: logagg.Stdout, Text: fmt.Sprintf("tick %d", i)})
	}
	w.Flush()
	want := "[6 similar log lines] [0] tick 0\n"
	for deadline := time.Now().Add(10 * time.Second); out.String() != want; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("stdout %q, want %q within 10s", out.String(), want)
		}
	}
	w.Write(logagg.Line{Time: time.Now(), Rank: 9, Stream: logagg.Stderr, Text: "bye"})
	w.Close()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("logs -f still running 10s after the job's log ended")
	}
	if errw.String() != "[9] bye\n" {
		t.Errorf("stderr %q", errw.String())
	}
	for deadline := time.Now().Add(5 * time.Second); runtime.NumGoroutine() > before; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines, %d before: the window ticker or the follower leaked", runtime.NumGoroutine(), before)
		}
	}
}

func TestLogsErrors(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("MONARCH_STATE_DIR", dir)
	if _, _, err := runLogsCmd(context.Background()); err == nil || err.Error() != "logs: no jobs in "+dir {
		t.Errorf("no jobs: %v", err)
	}
	logsWriteJob(t, dir, "j1", logsLines(2, logsT0))
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"nope"}, `logs: no job "nope"`},
		{[]string{"j1", "j2"}, "logs: too many arguments: \"j2\""},
		{[]string{"j1", "--since", "yesterday"}, `logs: --since "yesterday": want a duration back from now (10m, 1h30m) or an RFC3339 time`},
		{[]string{"j1", "--since", "-5m"}, `logs: --since "-5m"`},
		{[]string{"j1", "--stream", "stdin"}, `logs: --stream "stdin": want stdout or stderr`},
		{[]string{"j1", "--grep", "a("}, "logs: --grep: error parsing regexp"},
		{[]string{"j1", "--raw", "--aggregate", "3s"}, "logs: --raw and --aggregate: choose one"},
		{[]string{"j1", "--aggregate", "0s"}, `logs: --aggregate "0s": want a window`},
		{[]string{"j1", "--aggregate"}, "logs: --aggregate needs a value"},
		{[]string{"j1", "--color"}, "logs: unknown flag --color"},
		{[]string{"j1", "--rank", "one"}, `logs: --rank "one": want a whole number`},
		{[]string{"j1", "--host", "node9"}, "logs: no lines from host node9; job j1 has host node0 (ranks 0-1)"},
		{[]string{"j1", "--rank", "7", "--rank", "8"}, "logs: no lines of ranks 7-8; job j1 has host node0 (ranks 0-1)"},
	}
	for _, tt := range tests {
		_, _, err := runLogsCmd(context.Background(), tt.args...)
		if err == nil || !strings.HasPrefix(err.Error(), tt.want) {
			t.Errorf("logs %v: got %v, want %s...", tt.args, err, tt.want)
		}
	}
}

// A filter that matches nothing on a job with lines says what the job
// has, [client] lines included: "no lines at all" is only for a job
// without any (issue 40: 45 [client] lines and no proc's were "no lines
// at all").
func TestLogsNothingMatchedSaysWhatIs(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("MONARCH_STATE_DIR", dir)
	client := func(n int) []logagg.Line {
		var lines []logagg.Line
		for i := range n {
			lines = append(lines, logagg.Line{Time: logsT0.Add(time.Duration(i) * time.Millisecond), Proc: logagg.ClientProc, Stream: logagg.Stdout, Text: fmt.Sprintf("client %d", i)})
		}
		return lines
	}
	logsWriteJob(t, dir, "c45", client(45))
	meshed := logsLines(4, logsT0)
	for i := range meshed {
		meshed[i].Mesh = []string{"trainers", "gens"}[i%2]
	}
	logsWriteJob(t, dir, "mixed", append(meshed, client(3)...))
	logsWriteJob(t, dir, "empty", nil)
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"c45", "--rank", "0"}, "logs: no lines of rank 0; job c45 has no line of a proc, 45 [client] lines"},
		{[]string{"c45", "--mesh", "nope"}, "logs: no lines of mesh nope; job c45 has no line of a proc, 45 [client] lines"},
		{[]string{"c45", "--host", "h0", "--stream", "stderr"}, "logs: no stderr lines from host h0; job c45 has no line of a proc, lines on stdout, 45 [client] lines"},
		{[]string{"mixed", "--rank", "7"}, "logs: no lines of rank 7; job mixed has hosts node0 (ranks 0-1), node1 (ranks 2-3), meshes trainers, gens, 3 [client] lines"},
		{[]string{"mixed", "--mesh", "nope"}, "logs: no lines of mesh nope; job mixed has hosts node0 (ranks 0-1), node1 (ranks 2-3), meshes trainers, gens, 3 [client] lines"},
		{[]string{"empty", "--rank", "0"}, "logs: no lines of rank 0; job empty has no lines at all"},
	}
	for _, tt := range tests {
		_, _, err := runLogsCmd(context.Background(), tt.args...)
		if err == nil || err.Error() != tt.want {
			t.Errorf("logs %v:\n got %v\nwant %s", tt.args, err, tt.want)
		}
	}
}

func TestLogsCorruptIsAWarning(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("MONARCH_STATE_DIR", dir)
	logsWriteJob(t, dir, "c", logsLines(1, logsT0))
	f, err := os.OpenFile(filepath.Join(dir, "c.log"), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("garbage\n")
	f.Close()
	out, errOut, err := runLogsCmd(context.Background(), "c")
	if err != nil || out != "[0] step 0 loss=0.0\n" || errOut != "monarch: logs: skipped 1 corrupt records\n" {
		t.Errorf("got %v, stdout %q, stderr %q", err, out, errOut)
	}
}
