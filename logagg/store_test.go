package logagg_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/monarch-go/monarch/logagg"
)

var t0 = time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)

// sampleLines: 2 hosts, 4 ranks, both streams, one line a second.
func sampleLines() []logagg.Line {
	var lines []logagg.Line
	for i := range 40 {
		rank := i % 4
		s := logagg.Stdout
		if i%5 == 0 {
			s = logagg.Stderr
		}
		lines = append(lines, logagg.Line{
			Time:   t0.Add(time.Duration(i) * time.Second),
			Host:   fmt.Sprintf("node%d", rank/2),
			Proc:   fmt.Sprintf("h%d-%d", rank/2, rank%2),
			Rank:   rank,
			Stream: s,
			Text:   fmt.Sprintf("step %d loss=%.2f", i, 1/float64(i+1)),
		})
	}
	return lines
}

func writeLog(t *testing.T, dir, job string, max int64, lines []logagg.Line) {
	t.Helper()
	w, err := logagg.NewWriter(dir, job, max)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range lines {
		if err := w.Write(l); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

func readAll(t *testing.T, dir, job string, f logagg.Filter) []logagg.Line {
	t.Helper()
	var got []logagg.Line
	err := logagg.Read(context.Background(), dir, job, f, false, func(l logagg.Line) error {
		got = append(got, l)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func sameLine(a, b logagg.Line) bool {
	return a.Time.Equal(b.Time) && a.Host == b.Host && a.Proc == b.Proc && a.Mesh == b.Mesh && a.Rank == b.Rank && a.Stream == b.Stream && a.Text == b.Text
}

func sameLines(a, b []logagg.Line) bool {
	return slices.EqualFunc(a, b, sameLine)
}

func TestStoreRoundTripFilters(t *testing.T) {
	dir := t.TempDir()
	lines := sampleLines()
	writeLog(t, dir, "j1", 0, lines)
	tests := []struct {
		name string
		f    logagg.Filter
		want int
	}{
		{"all", logagg.Filter{}, 40},
		{"since", logagg.Filter{Since: t0.Add(30 * time.Second)}, 10},
		{"host", logagg.Filter{Hosts: []string{"node1"}}, 20},
		{"hosts", logagg.Filter{Hosts: []string{"node0", "node1"}}, 40},
		{"unknown host", logagg.Filter{Hosts: []string{"nowhere"}}, 0},
		{"ranks", logagg.Filter{Ranks: []int{0, 3}}, 20},
		{"stderr", logagg.Filter{Stream: logagg.Stderr}, 8},
		{"stdout", logagg.Filter{Stream: logagg.Stdout}, 32},
		{"grep", logagg.Filter{Grep: regexp.MustCompile(`^step 1\d `)}, 10},
		{"all of them", logagg.Filter{Since: t0.Add(10 * time.Second), Hosts: []string{"node0"}, Ranks: []int{0}, Stream: logagg.Stderr, Grep: regexp.MustCompile(`loss`)}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := readAll(t, dir, "j1", tt.f)
			var want []logagg.Line
			for _, l := range lines {
				if tt.f.Match(l) {
					want = append(want, l)
				}
			}
			if len(got) != tt.want || !sameLines(got, want) {
				t.Errorf("got %d lines, want %d:\n%v\n%v", len(got), tt.want, got, want)
			}
		})
	}
}

// Whatever a proc prints comes back as it was, invalid UTF-8 aside.
func TestStoreTextRoundTrip(t *testing.T) {
	dir := t.TempDir()
	texts := []string{"", `quote " backslash \ tab` + "\t cr\r nul\x00 esc\x1b[31m", "unicode 损失 ✓ é", "<html> & </html>", "\u2028\u2029", strings.Repeat("x", 4096)}
	var lines []logagg.Line
	for i, s := range texts {
		lines = append(lines, logagg.Line{Time: t0.Add(time.Duration(i) * time.Nanosecond), Host: `h"1`, Proc: "p\n", Rank: -i, Stream: logagg.Stdout, Text: s})
	}
	lines = append(lines, logagg.Line{Time: t0.In(time.FixedZone("X", 3600)), Rank: 1 << 40, Stream: 7, Text: "odd stream"})
	writeLog(t, dir, "j", 0, append(lines, logagg.Line{Time: t0, Stream: logagg.Stderr, Text: "bad \xff utf8"}))
	got := readAll(t, dir, "j", logagg.Filter{})
	if len(got) != len(lines)+1 || !sameLines(got[:len(lines)], lines) {
		t.Fatalf("got\n%+v\nwant\n%+v", got, lines)
	}
	if last := got[len(lines)]; last.Text != "bad \uFFFD utf8" || last.Stream != logagg.Stderr {
		t.Errorf("invalid UTF-8: got %+v", last)
	}
}

func TestStoreRotation(t *testing.T) {
	dir := t.TempDir()
	const max = 4096
	w, err := logagg.NewWriter(dir, "rot", max)
	if err != nil {
		t.Fatal(err)
	}
	var lines []logagg.Line
	for i := range 1000 {
		l := logagg.Line{Time: t0.Add(time.Duration(i) * time.Millisecond), Host: "h", Proc: "p", Rank: i % 8, Stream: logagg.Stdout, Text: fmt.Sprintf("line %d", i)}
		lines = append(lines, l)
		if err := w.Write(l); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	names, _ := filepath.Glob(filepath.Join(dir, "rot.log*"))
	if !slices.Equal(names, []string{filepath.Join(dir, "rot.log"), filepath.Join(dir, "rot.log.1")}) {
		t.Fatalf("files %v, want rot.log and rot.log.1", names)
	}
	for _, n := range names {
		fi, err := os.Stat(n)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Size() > max+200 { // a file passes max by one record at most
			t.Errorf("%s: %d bytes, bound %d", n, fi.Size(), max)
		}
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v, want 0600", n, fi.Mode().Perm())
		}
	}
	got := readAll(t, dir, "rot", logagg.Filter{})
	if len(got) < 50 || !sameLines(got, lines[len(lines)-len(got):]) {
		t.Fatalf("replay after rotation: %d lines, not the last ones in order: first %+v", len(got), got[:min(len(got), 1)])
	}
}

// follower runs Read with follow in the background.
type follower struct {
	lines chan logagg.Line
	done  chan error
}

func follow(ctx context.Context, dir, job string) *follower {
	f := &follower{lines: make(chan logagg.Line, 100000), done: make(chan error, 1)}
	go func() {
		f.done <- logagg.Read(ctx, dir, job, logagg.Filter{}, true, func(l logagg.Line) error {
			f.lines <- l
			return nil
		})
	}()
	return f
}

// next waits, boundedly, for n more lines.
func (f *follower) next(t *testing.T, n int) []logagg.Line {
	t.Helper()
	var got []logagg.Line
	deadline := time.After(10 * time.Second)
	for len(got) < n {
		select {
		case l := <-f.lines:
			got = append(got, l)
		case err := <-f.done:
			f.done <- err // for end
			// Lines emitted before the end may still be in the channel.
			for len(got) < n {
				select {
				case l := <-f.lines:
					got = append(got, l)
				default:
					t.Fatalf("follow ended (%v) after %d of %d lines", err, len(got), n)
				}
			}
		case <-deadline:
			t.Fatalf("only %d of %d lines within 10s", len(got), n)
		}
	}
	return got
}

// end waits, boundedly, for Read to return.
func (f *follower) end(t *testing.T, within time.Duration) error {
	t.Helper()
	select {
	case err := <-f.done:
		return err
	case <-time.After(within):
		t.Fatalf("follow still running after %v", within)
		return nil
	}
}

// checkNoGoroutineLeak fails if, within a bound, the goroutines are not
// back to n.
func checkNoGoroutineLeak(t *testing.T, n int) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); runtime.NumGoroutine() > n; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines, %d before", runtime.NumGoroutine(), n)
		}
	}
}

// liveLog starts a log that stays open for the test, with the first 10
// sample lines written; it returns its writer and all the sample lines.
func liveLog(t *testing.T, dir, job string) (*logagg.Writer, []logagg.Line) {
	t.Helper()
	w, err := logagg.NewWriter(dir, job, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	lines := sampleLines()
	for _, l := range lines[:10] {
		w.Write(l)
	}
	w.Flush()
	return w, lines
}

func TestStoreFollow(t *testing.T) {
	defer checkNoGoroutineLeak(t, runtime.NumGoroutine())
	dir := t.TempDir()
	w, lines := liveLog(t, dir, "f")
	f := follow(context.Background(), dir, "f")
	if got := f.next(t, 10); !sameLines(got, lines[:10]) {
		t.Fatalf("replay: %v", got)
	}
	for _, l := range lines[10:] {
		w.Write(l)
	}
	w.Flush()
	if got := f.next(t, 30); !sameLines(got, lines[10:]) {
		t.Fatalf("followed: %v", got)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.end(t, 5*time.Second); err != nil {
		t.Fatalf("follow after Close: %v", err)
	}
}

// A follower sees every line, in order, across rotations that happen
// while it follows, even two between its looks (each batch is about 1.5
// times maxBytes, so it rotates the file once or twice).
func TestStoreFollowRotation(t *testing.T) {
	dir := t.TempDir()
	const max = 2048
	w, err := logagg.NewWriter(dir, "fr", max)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	f := follow(context.Background(), dir, "fr")
	n := 0
	for range 12 {
		var batch []logagg.Line
		for range 36 {
			l := logagg.Line{Time: t0, Host: "h", Proc: "p", Rank: n % 4, Stream: logagg.Stdout, Text: fmt.Sprintf("line %04d", n)}
			n++
			batch = append(batch, l)
			if err := w.Write(l); err != nil {
				t.Fatal(err)
			}
		}
		w.Flush()
		if got := f.next(t, len(batch)); !sameLines(got, batch) {
			t.Fatalf("got %v\nwant %v", got, batch)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "fr.log.1")); err != nil {
		t.Fatalf("no rotation happened: %v", err)
	}
	w.Close()
	if err := f.end(t, 5*time.Second); err != nil {
		t.Fatal(err)
	}
}

// A record whose newline has not been written yet is not emitted early,
// nor lost.
func TestStoreFollowPartialLine(t *testing.T) {
	dir := t.TempDir()
	w, err := logagg.NewWriter(dir, "p", 0)
	if err != nil {
		t.Fatal(err)
	}
	w.Flush()
	raw, err := os.OpenFile(filepath.Join(dir, "p.log"), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	raw.WriteString(`{"t":"2026-12-02T10:00:00Z","h":"h","p":"p","r":1,"s":"stdout","x":"hel`)
	f := follow(context.Background(), dir, "p")
	select {
	case l := <-f.lines:
		t.Fatalf("emitted %+v before its newline", l)
	case <-time.After(600 * time.Millisecond):
	}
	raw.WriteString("lo\"}\n")
	if got := f.next(t, 1); got[0].Text != "hello" || got[0].Rank != 1 {
		t.Fatalf("got %+v", got[0])
	}
	w.Close()
	if err := f.end(t, 5*time.Second); err != nil {
		t.Fatal(err)
	}
}

// TestStoreHelperWriter is not a test: it is the writer process of
// TestStoreFollowWriterKilled, run as a child.
func TestStoreHelperWriter(t *testing.T) {
	dir := os.Getenv("LOGAGG_TEST_WRITER_DIR")
	if dir == "" {
		t.Skip("helper process only")
	}
	w, err := logagg.NewWriter(dir, "child", 0)
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	for i := range 3 {
		w.Write(logagg.Line{Time: time.Now(), Host: "h", Proc: "p", Rank: i, Stream: logagg.Stdout, Text: fmt.Sprintf("child %d", i)})
	}
	w.Flush()
	fmt.Println("ready")
	time.Sleep(time.Minute) // killed long before; bounded if not
	os.Exit(0)
}

func TestStoreFollowWriterKilled(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestStoreHelperWriter$")
	cmd.Env = append(os.Environ(), "LOGAGG_TEST_WRITER_DIR="+dir)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	reap := func() { once.Do(func() { cmd.Process.Kill(); cmd.Wait() }) }
	t.Cleanup(reap)
	ready := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(stdout).ReadString('\n')
		ready <- line
	}()
	select {
	case line := <-ready:
		if line != "ready\n" {
			t.Fatalf("child said %q", line)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("child writer not ready within 30s")
	}
	f := follow(context.Background(), dir, "child")
	f.next(t, 3)
	select {
	case err := <-f.done:
		t.Fatalf("follow ended while the writer lives: %v", err)
	case <-time.After(1500 * time.Millisecond):
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	reap()
	if err := f.end(t, 5*time.Second); err != nil {
		t.Fatalf("follow after the writer died: %v", err)
	}
}

// A writer on another host cannot be checked: follow waits for its end
// record or for ctx.
func TestStoreFollowOtherHost(t *testing.T) {
	dir := t.TempDir()
	log := `{"t":"2026-12-02T10:00:00Z","k":"start","job":"o","h":"another-host","pid":2147483647}` + "\n" +
		`{"t":"2026-12-02T10:00:00Z","h":"h","p":"p","r":0,"s":"stdout","x":"hi"}` + "\n"
	if err := os.WriteFile(filepath.Join(dir, "o.log"), []byte(log), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	f := follow(ctx, dir, "o")
	f.next(t, 1)
	if err := f.end(t, 5*time.Second); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v, want the context's error", err)
	}
}

func TestStoreCorruptRecords(t *testing.T) {
	dir := t.TempDir()
	lines := sampleLines()[:3]
	writeLog(t, dir, "c", 0, lines[:2])
	f, err := os.OpenFile(filepath.Join(dir, "c.log"), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("not json\n\n{\"t\":\"yesterday\"}\n{\"s\":\"stdsomething\"}\n{\"k\":\"future-kind\"}\n")
	f.WriteString(`{"x":"` + strings.Repeat("y", 3<<20) + "\"}\n") // over the bound a reader holds
	f.Close()
	writeLog(t, dir, "c", 0, lines[2:])
	var got []logagg.Line
	err = logagg.Read(context.Background(), dir, "c", logagg.Filter{}, false, func(l logagg.Line) error {
		got = append(got, l)
		return nil
	})
	var ce *logagg.CorruptError
	if !errors.Is(err, logagg.ErrCorrupt) || !errors.As(err, &ce) || ce.Records != 4 {
		t.Fatalf("err = %v, want 4 corrupt records", err)
	}
	if !sameLines(got, lines) {
		t.Fatalf("got %v", got)
	}
}

// Between a writer's rename and its create only <job>.log.1 exists: it is
// read, and a follower moves on to the new file when it comes.
func TestStoreOnlyRotatedFile(t *testing.T) {
	dir := t.TempDir()
	lines := sampleLines()
	w, err := logagg.NewWriter(dir, "r", 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	for _, l := range lines[:20] {
		w.Write(l)
	}
	w.Flush()
	if err := os.Rename(filepath.Join(dir, "r.log"), filepath.Join(dir, "r.log.1")); err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, dir, "r", logagg.Filter{}); !sameLines(got, lines[:20]) {
		t.Fatalf("got %v", got)
	}
	f := follow(context.Background(), dir, "r")
	f.next(t, 20)
	writeLog(t, dir, "r", 0, lines[20:])
	if got := f.next(t, 20); !sameLines(got, lines[20:]) {
		t.Fatalf("got %v", got)
	}
	if err := f.end(t, 5*time.Second); err != nil {
		t.Fatal(err)
	}
}

// A writer that appends to the log of one that crashed mid-record starts
// on a line of its own: only the torn record is lost.
func TestStoreAppendAfterTornRecord(t *testing.T) {
	dir := t.TempDir()
	lines := sampleLines()[:2]
	w, err := logagg.NewWriter(dir, "t", 0)
	if err != nil {
		t.Fatal(err)
	}
	w.Write(lines[0])
	w.Flush()
	f, err := os.OpenFile(filepath.Join(dir, "t.log"), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`{"t":"2026-12-02T10:00:00Z","h":"h","p":"p","r":1,"s":"std`)
	f.Close()
	writeLog(t, dir, "t", 0, lines[1:])
	var got []logagg.Line
	err = logagg.Read(context.Background(), dir, "t", logagg.Filter{}, true, func(l logagg.Line) error {
		got = append(got, l)
		return nil
	})
	var ce *logagg.CorruptError
	if !errors.As(err, &ce) || ce.Records != 1 || !sameLines(got, lines) {
		t.Fatalf("err %v, lines %v", err, got)
	}
	w.Close()
}

func TestStoreEmitError(t *testing.T) {
	dir := t.TempDir()
	writeLog(t, dir, "e", 0, sampleLines())
	stop := errors.New("enough")
	n := 0
	err := logagg.Read(context.Background(), dir, "e", logagg.Filter{}, true, func(logagg.Line) error {
		if n++; n == 5 {
			return stop
		}
		return nil
	})
	if err != stop || n != 5 {
		t.Fatalf("err %v after %d lines", err, n)
	}
}

func TestStoreUnknownJob(t *testing.T) {
	dir := t.TempDir()
	err := logagg.Read(context.Background(), dir, "x", logagg.Filter{}, false, nil)
	if want := fmt.Sprintf(`logs: no job "x"; no jobs in %s`, dir); err == nil || err.Error() != want {
		t.Fatalf("got %v, want %s", err, want)
	}
	writeLog(t, dir, "j1", 0, nil)
	writeLog(t, dir, "j2", 0, nil)
	os.Chtimes(filepath.Join(dir, "j1.log"), time.Time{}, time.Now().Add(-time.Hour))
	os.WriteFile(filepath.Join(dir, "j3.json"), nil, 0o600) // not a log
	jobs, err := logagg.Jobs(dir)
	if err != nil || !slices.Equal(jobs, []string{"j2", "j1"}) {
		t.Fatalf("Jobs = %v, %v; want [j2 j1]", jobs, err)
	}
	err = logagg.Read(context.Background(), dir, "x", logagg.Filter{}, false, nil)
	if !errors.Is(err, logagg.ErrNoJob) || err.Error() != `logs: no job "x"; known jobs: j2, j1` {
		t.Fatalf("got %v", err)
	}
	if jobs, err := logagg.Jobs(filepath.Join(dir, "missing")); err != nil || jobs != nil {
		t.Fatalf("missing dir: %v, %v", jobs, err)
	}
	for _, bad := range []string{"", "../j1", "a/b", ".hidden"} {
		if err := logagg.Read(context.Background(), dir, bad, logagg.Filter{}, false, nil); err == nil || errors.Is(err, logagg.ErrNoJob) {
			t.Errorf("job %q: got %v, want a bad name error", bad, err)
		}
		if _, err := logagg.NewWriter(dir, bad, 0); err == nil {
			t.Errorf("NewWriter(%q) accepted", bad)
		}
	}
}

func TestStoreModes(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state", "jobs")
	writeLog(t, dir, "m", 0, sampleLines())
	for path, want := range map[string]os.FileMode{dir: 0o700, filepath.Dir(dir): 0o700, filepath.Join(dir, "m.log"): 0o600} {
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != want {
			t.Errorf("%s: mode %v, want %v", path, fi.Mode().Perm(), want)
		}
	}
}

// Writers from many goroutines, while another reads: every record whole.
func TestStoreConcurrentWrites(t *testing.T) {
	dir := t.TempDir()
	w, err := logagg.NewWriter(dir, "cc", 8192)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				w.Write(logagg.Line{Time: t0, Rank: g, Stream: logagg.Stdout, Text: fmt.Sprintf("g%d %d", g, i)})
				if i%50 == 0 {
					w.Flush()
				}
			}
		}()
	}
	wg.Wait()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.Write(logagg.Line{}); err == nil {
		t.Error("Write after Close succeeded")
	}
	if err := w.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	last := map[int]int{0: -1, 1: -1, 2: -1, 3: -1}
	for _, l := range readAll(t, dir, "cc", logagg.Filter{}) {
		var g, i int
		if _, err := fmt.Sscanf(l.Text, "g%d %d", &g, &i); err != nil || g != l.Rank || i <= last[g] {
			t.Fatalf("line %+v out of order (last of g%d: %d)", l, g, last[g])
		}
		last[g] = i
	}
}

// Follow calls caughtUp once every line written so far is emitted, again
// at each poll while nothing comes, and stops on its error.
func TestStoreFollowCaughtUp(t *testing.T) {
	defer checkNoGoroutineLeak(t, runtime.NumGoroutine())
	dir := t.TempDir()
	w, lines := liveLog(t, dir, "c")
	stop := errors.New("enough")
	var emitted []int // lines emitted before each caughtUp
	n := 0
	err := logagg.Follow(context.Background(), dir, "c", logagg.Filter{}, func(logagg.Line) error {
		n++
		return nil
	}, func() error {
		emitted = append(emitted, n)
		switch len(emitted) {
		case 1: // caught up with what was written: write more
			for _, l := range lines[10:] {
				w.Write(l)
			}
			w.Flush()
		case 4:
			return stop
		}
		return nil
	})
	if err != stop {
		t.Fatalf("Follow: %v, want %v", err, stop)
	}
	if want := []int{10, 40, 40, 40}; !slices.Equal(emitted, want) {
		t.Fatalf("lines emitted at each caughtUp: %v, want %v", emitted, want)
	}
}
