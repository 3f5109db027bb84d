package actorrt_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/monarch-go/monarch/actorrt"
	"github.com/monarch-go/monarch/logagg"
)

// Journal writes lines to a file through a buffer that only its Cleanup
// flushes: a line is on disk only if Cleanup ran, and each run of Cleanup
// adds one "cleanup:" line.
type Journal struct {
	f    *os.File
	w    *bufio.Writer
	mode string // "": clean up; "hang": then block; "panic": then panic
}

func (j *Journal) Init(ctx *actorrt.Context, dir, mode string) error {
	f, err := os.Create(filepath.Join(dir, ctx.ActorInstance().ID()))
	if err != nil {
		return err
	}
	j.f, j.w, j.mode = f, bufio.NewWriterSize(f, 1<<20), mode
	return nil
}

func (j *Journal) Write(ctx *actorrt.Context, line string) error {
	_, err := fmt.Fprintln(j.w, line)
	return err
}

func (j *Journal) Fail(ctx *actorrt.Context, msg string) error { return errors.New(msg) }

// AwaitStopNotice returns once this proc has heard that the job is
// stopping (bounded).
func (j *Journal) AwaitStopNotice(ctx *actorrt.Context) (string, error) {
	timeout := time.After(20 * time.Second)
	notices := actorrt.Preempted(ctx)
	for {
		select {
		case n := <-notices:
			if n.Stop {
				return n.Reason, nil
			}
		case <-timeout:
			return "", errors.New("no stop notice within 20s")
		}
	}
}

// Quit stops this member after the message.
func (j *Journal) Quit(ctx *actorrt.Context) error {
	ctx.Stop()
	return nil
}

// Cleanup records the cause (and whether errors.Is finds ErrStopped and
// ErrActorFailed in it), flushes, and then does what its mode says.
func (j *Journal) Cleanup(ctx *actorrt.Context, cause error) error {
	fmt.Fprintf(j.w, "cleanup: stopped=%v failed=%v %v\n",
		errors.Is(cause, actorrt.ErrStopped), errors.Is(cause, actorrt.ErrActorFailed), cause)
	if err := j.w.Flush(); err != nil {
		return err
	}
	if err := j.f.Close(); err != nil {
		return err
	}
	switch j.mode {
	case "hang":
		select {} // ignores ctx: only the bound ends the wait for it
	case "panic":
		panic("cleanup " + j.mode)
	}
	return nil
}

// BadCleanup's Cleanup has the wrong shape: Register refuses it.
type BadCleanup struct{}

func (b *BadCleanup) Cleanup(ctx *actorrt.Context) error { return nil }

func init() {
	if err := actorrt.Register[Journal](); err != nil {
		panic(err)
	}
}

var (
	journalWrite = actorrt.VoidMethod1((*Journal).Write)
	journalFail  = actorrt.VoidMethod1((*Journal).Fail)
	journalQuit  = actorrt.VoidMethod((*Journal).Quit)
)

// writeLines has every member write lines first, second, third, waiting
// for each; nothing reaches the disk yet.
func writeLines(t *testing.T, j *actorrt.ActorMesh[Journal], dir string) {
	t.Helper()
	ctx := testCtx(t)
	for _, line := range []string{"first", "second", "third"} {
		if _, err := journalWrite.Call(j, line).Get(ctx); err != nil {
			t.Fatal(err)
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if info, err := e.Info(); err != nil || info.Size() != 0 {
			t.Fatalf("%s before any Cleanup: %v, %v; want empty", e.Name(), info, err)
		}
	}
}

// journalOf is what member id wrote to dir, once it holds a cleanup line
// (it waits for one, bounded).
func journalOf(t *testing.T, dir, id string) string {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		b, err := os.ReadFile(filepath.Join(dir, id))
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(b, []byte("cleanup:")) {
			return string(b)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: no Cleanup within 20s; file: %q", id, b)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// checkJournal checks that the journal has the three lines and then one
// cleanup line that has every one of want.
func checkJournal(t *testing.T, id, got string, want ...string) {
	t.Helper()
	lines := strings.Split(strings.TrimSuffix(got, "\n"), "\n")
	if len(lines) != 4 || strings.Join(lines[:3], " ") != "first second third" || !strings.HasPrefix(lines[3], "cleanup:") {
		t.Fatalf("%s wrote %q; want the three lines and one cleanup line", id, got)
	}
	for _, w := range want {
		if !strings.Contains(lines[3], w) {
			t.Errorf("%s: cleanup line %q lacks %q", id, lines[3], w)
		}
	}
}

func readJournal(t *testing.T, dir, id string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, id))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestCleanupAfterMeshStop: a mesh's Stop runs every member's Cleanup,
// once, with ErrStopped as cause; the proc's end later does not run it
// again.
func TestCleanupAfterMeshStop(t *testing.T) {
	inProcess(t)
	ctx := testCtx(t)
	dir := t.TempDir()
	procs := spawnProcs(t, actorrt.Dims{{"gpus", 2}})
	j := spawn[Journal](t, procs, "journal-stop", dir, "")
	writeLines(t, j, dir)
	if err := j.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"journal-stop[0]", "journal-stop[1]"} {
		checkJournal(t, id, journalOf(t, dir, id), "stopped=true", "mesh journal-stop was stopped")
	}
	if _, err := journalWrite.Call(j, "late").Get(ctx); !errors.Is(err, actorrt.ErrStopped) {
		t.Fatalf("a call after Stop: %v, want ErrStopped", err)
	}
	if err := procs.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"journal-stop[0]", "journal-stop[1]"} {
		checkJournal(t, id, readJournal(t, dir, id)) // one cleanup line still
	}
}

// TestCleanupAtProcStop: a proc asked to exit (ProcMesh.Stop: SIGTERM
// from its agent) runs the cleanups of its actors before it exits.
func TestCleanupAtProcStop(t *testing.T) {
	ctx := testCtx(t)
	dir := t.TempDir()
	procs := spawnProcs(t, actorrt.Dims{{"gpus", 2}})
	j := spawn[Journal](t, procs, "journal-procstop", dir, "")
	writeLines(t, j, dir)
	if err := procs.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	// Stop returned once the procs exited: the files are complete.
	for i, id := range []string{"journal-procstop[0]", "journal-procstop[1]"} {
		proc := actorrt.ProcIDs(procs)[i]
		checkJournal(t, id, readJournal(t, dir, id), "stopped=true", "proc "+proc+" was asked to stop (SIGTERM)")
	}
}

// TestCleanupAfterFailure: a member that fails (an endpoint error nobody
// receives) runs its Cleanup once, with the failure as cause; the others
// run on until their proc ends.
func TestCleanupAfterFailure(t *testing.T) {
	ctx := testCtx(t)
	dir := t.TempDir()
	procs := spawnProcs(t, actorrt.Dims{{"gpus", 2}})
	j := spawn[Journal](t, procs, "journal-fail", dir, "")
	writeLines(t, j, dir)
	if err := journalFail.Broadcast(j.At("gpus", 1), "disk on fire"); err != nil {
		t.Fatal(err)
	}
	waitFailure(t, "journal-fail")
	checkJournal(t, "journal-fail[1]", journalOf(t, dir, "journal-fail[1]"), "failed=true", "disk on fire")
	if got := readJournal(t, dir, "journal-fail[0]"); got != "" {
		t.Fatalf("journal-fail[0], still running, wrote %q", got)
	}
	if err := procs.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	checkJournal(t, "journal-fail[0]", readJournal(t, dir, "journal-fail[0]"), "stopped=true", "SIGTERM")
	checkJournal(t, "journal-fail[1]", readJournal(t, dir, "journal-fail[1]"), "failed=true") // once
}

// TestContextStop: an actor stops itself with ctx.Stop: that member
// alone, after the message; the messages behind it and later calls get
// ErrStopped naming it; Cleanup runs; its owner hears of no failure.
func TestContextStop(t *testing.T) {
	inProcess(t)
	ctx := testCtx(t)
	dir := t.TempDir()
	procs := spawnProcs(t, actorrt.Dims{{"gpus", 2}})
	j := spawn[Journal](t, procs, "journal-self", dir, "")
	writeLines(t, j, dir)
	quit := journalQuit.Call(j.At("gpus", 0))
	behind := journalWrite.Call(j.At("gpus", 0), "behind")
	if _, err := quit.Get(ctx); err != nil {
		t.Fatalf("Quit: %v", err)
	}
	if _, err := behind.Get(ctx); !errors.Is(err, actorrt.ErrStopped) || !strings.Contains(err.Error(), "journal-self[0]") {
		t.Fatalf("a call queued behind Quit: %v, want ErrStopped naming journal-self[0]", err)
	}
	checkJournal(t, "journal-self[0]", journalOf(t, dir, "journal-self[0]"), "stopped=true", "stopped itself")
	_, err := journalWrite.Call(j.At("gpus", 0), "later").Get(ctx)
	if !errors.Is(err, actorrt.ErrStopped) || !strings.Contains(err.Error(), "journal-self[0] stopped itself") {
		t.Fatalf("a later call: %v, want ErrStopped naming journal-self[0]", err)
	}
	// The other member serves on.
	if _, err := journalWrite.Call(j.At("gpus", 1), "fourth").Get(ctx); err != nil {
		t.Fatalf("the other member: %v", err)
	}
	if err := procs.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	checkJournal(t, "journal-self[0]", readJournal(t, dir, "journal-self[0]"), "stopped itself") // once
	if got := readJournal(t, dir, "journal-self[1]"); !strings.Contains(got, "fourth\ncleanup:") {
		t.Fatalf("journal-self[1] wrote %q", got)
	}
	failures.mu.Lock()
	defer failures.mu.Unlock()
	for _, f := range failures.all {
		if f.Mesh == "journal-self" {
			t.Fatalf("a stop of its own reached the owner as a failure: %v", f)
		}
	}
}

// TestCleanupBounded: a Cleanup that hangs is abandoned at the cleanup
// timeout and logged, naming the actor and the bound, after a mesh stop
// and when the proc is asked to exit, which it then does by itself
// (before the stop timeout would kill it); one that panics is logged and
// the proc serves on.
func TestCleanupBounded(t *testing.T) {
	ctx := testCtx(t)
	dir := t.TempDir()
	procs := spawnProcs(t, actorrt.Dims{{"gpus", 1}})
	stopped := spawn[Journal](t, procs, "hang-stopped", dir, "hang")
	ending := spawn[Journal](t, procs, "hang-ending", dir, "hang")
	panicky := spawn[Journal](t, procs, "cleanup-panics", dir, "panic")
	job, _, _ := actorrt.JobBus(clientCtx)
	syslog := filepath.Join(logagg.SystemLogDir(), "monarch_"+job+"_proc-"+actorrt.ProcIDs(procs)[0]+".log")

	for _, m := range []*actorrt.ActorMesh[Journal]{stopped, panicky} {
		if err := m.Stop(ctx); err != nil {
			t.Fatal(err)
		}
	}
	waitLogged(t, syslog, "actor hang-stopped[0]: Cleanup did not return within 2s")
	waitLogged(t, syslog, "actor cleanup-panics[0]: Cleanup panicked: cleanup panic")
	if _, err := journalWrite.Call(ending, "still here").Get(ctx); err != nil {
		t.Fatalf("after a Cleanup hung and one panicked: %v", err)
	}
	if err := procs.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(syslog)
	if err != nil {
		t.Fatal(err)
	}
	if want := "actor hang-ending[0]: Cleanup did not return within 2s"; !bytes.Contains(b, []byte(want)) {
		t.Fatalf("the proc's log lacks %q: it did not end its stop by itself", want)
	}
	for _, id := range []string{"hang-stopped[0]", "hang-ending[0]", "cleanup-panics[0]"} {
		if n := strings.Count(readJournal(t, dir, id), "cleanup:"); n != 1 {
			t.Errorf("%s: %d cleanup lines, want 1", id, n)
		}
	}
}

// TestCleanupAtJobStop: SIGTERM to the client (monarch stop, a
// preemption) stops the job after its grace; the procs' cleanups run
// with the job's stop notice as cause.
func TestCleanupAtJobStop(t *testing.T) {
	dir := t.TempDir()
	cmd := helperCmd(t, "cleanup-sigterm")
	cmd.Env = append(cmd.Env, "MONARCH_TEST_JOURNAL_DIR="+dir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	kill := time.AfterFunc(60*time.Second, func() { cmd.Process.Kill() })
	defer kill.Stop()
	lines := bufio.NewScanner(out)
	for lines.Scan() && lines.Text() != "READY" {
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	for lines.Scan() {
	}
	err = cmd.Wait()
	if ee := (*exec.ExitError)(nil); !errors.As(err, &ee) || ee.ExitCode() != 143 {
		t.Fatalf("the client ended with %v, want exit status 143", err)
	}
	checkJournal(t, "journal-term[0]", readJournal(t, dir, "journal-term[0]"), "stopped=false", "job ending: stop requested (SIGTERM)")
}

// helperCleanupSigterm writes a journal on a proc, says READY, and waits
// for SIGTERM; it returns once the proc has the stop notice.
func helperCleanupSigterm() int {
	return actorrt.Run(func(ctx context.Context) error {
		procs, err := actorrt.ThisHost(ctx).SpawnProcs(ctx, actorrt.Dims{{"gpus", 1}})
		if err != nil {
			return err
		}
		j, err := actorrt.Spawn[Journal](ctx, procs, "journal-term", os.Getenv("MONARCH_TEST_JOURNAL_DIR"), "")
		if err != nil {
			return err
		}
		for _, line := range []string{"first", "second", "third"} {
			if _, err := journalWrite.Call(j, line).Get(ctx); err != nil {
				return err
			}
		}
		fmt.Println("READY")
		<-ctx.Done()
		wait, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, err = actorrt.Method((*Journal).AwaitStopNotice).CallOne(j).Get(wait)
		return err
	})
}

// waitLogged waits (bounded) until the file has want.
func waitLogged(t *testing.T, path, want string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		b, _ := os.ReadFile(path)
		if bytes.Contains(b, []byte(want)) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: no %q within 20s; it has:\n%s", path, want, b)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestCleanupRegister: Cleanup's signature is checked at Register, and
// Cleanup is not an endpoint.
func TestCleanupRegister(t *testing.T) {
	inProcess(t)
	err := actorrt.Register[BadCleanup]()
	if !errors.Is(err, actorrt.ErrBadEndpoint) || !strings.Contains(err.Error(), "BadCleanup.Cleanup must be func(ctx *actorrt.Context, cause error) error") {
		t.Fatalf("Register[BadCleanup]: %v", err)
	}
	dir := t.TempDir()
	j := spawn[Journal](t, actorrt.ThisProc(rootCtx(t)), "journal-register", dir, "")
	_, err = actorrt.VoidMethod1((*Journal).Cleanup).CallOne(j, nil).Get(testCtx(t))
	if !errors.Is(err, actorrt.ErrBadEndpoint) || !strings.Contains(err.Error(), "Cleanup is not an endpoint") {
		t.Errorf("calling Cleanup: %v, want ErrBadEndpoint", err)
	}
	// In the client too, a mesh's Stop runs Cleanup (before dir goes).
	if err := j.Stop(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	if got := journalOf(t, dir, "journal-register[0]"); !strings.Contains(got, "mesh journal-register was stopped") {
		t.Fatalf("journal-register[0] wrote %q", got)
	}
}
