package actorrt_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/monarch-go/monarch/actorrt"
)

// helperTree is a client that starts 2 procs, each of which starts 2 procs
// of its own, prints every pid and waits.
func helperTree() int {
	return actorrt.Run(func(ctx context.Context) error {
		procs, err := actorrt.ThisHost(ctx).SpawnProcs(ctx, actorrt.Dims{{"hosts", 2}})
		if err != nil {
			return err
		}
		starters, err := actorrt.Spawn[Starter](ctx, procs, "starters")
		if err != nil {
			return err
		}
		inner, err := actorrt.Method((*Starter).Start).Call(starters).Get(ctx)
		if err != nil {
			return err
		}
		pids, err := actorrt.Method((*Starter).PID).Call(starters).Get(ctx)
		if err != nil {
			return err
		}
		for _, p := range pids.Values() {
			fmt.Println("PID", p)
		}
		for _, pm := range inner.Values() {
			c, err := actorrt.Spawn[Crasher](ctx, pm, "c")
			if err != nil {
				return err
			}
			pid, err := actorrt.Method((*Crasher).PID).CallOne(c).Get(ctx)
			if err != nil {
				return err
			}
			fmt.Println("PID", pid)
		}
		fmt.Println("READY")
		<-ctx.Done()
		return nil
	})
}

// helperFailure is a client whose actor fails with nobody to handle it:
// the default hook prints the failure and the client exits 1.
func helperFailure(opts ...actorrt.Option) int {
	return actorrt.Run(func(ctx context.Context) error {
		procs, err := actorrt.ThisHost(ctx).SpawnProcs(ctx, actorrt.Dims{{"gpus", 1}})
		if err != nil {
			return err
		}
		e, err := actorrt.Spawn[Echo](ctx, procs, "unsupervised")
		if err != nil {
			return err
		}
		if err := actorrt.VoidMethod1((*Echo).Fail).Broadcast(e, "nobody catches this"); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
		case <-time.After(30 * time.Second):
		}
		return errors.New("the failure did not end the client")
	}, opts...)
}

// helperFailureOwnHook is helperFailure with a fault hook of the
// program's own, which lets the failure end the job too.
func helperFailureOwnHook() int {
	return helperFailure(actorrt.WithFaultHook(func(f *actorrt.MeshFailure) error { return fmt.Errorf("own hook: %w", f) }))
}

// startTree runs the tree helper and returns it with the pids it printed.
func startTree(t *testing.T) (*exec.Cmd, []int) {
	t.Helper()
	cmd := helperCmd(t, "tree")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	deadline := time.AfterFunc(60*time.Second, func() { cmd.Process.Kill() })
	defer deadline.Stop()
	var pids []int
	lines := bufio.NewScanner(out)
	for lines.Scan() && lines.Text() != "READY" {
		if p, ok := strings.CutPrefix(lines.Text(), "PID "); ok {
			pid, _ := strconv.Atoi(p)
			pids = append(pids, pid)
		}
	}
	if len(pids) != 4 {
		t.Fatalf("helper reported pids %v, want 4", pids)
	}
	for _, p := range pids {
		if !alive(p) {
			t.Fatalf("proc %d not running before the client ends", p)
		}
	}
	return cmd, pids
}

// waitGone waits up to 10s for every pid to be gone and says how long it
// took.
func waitGone(t *testing.T, pids []int) time.Duration {
	t.Helper()
	start := time.Now()
	for time.Since(start) < 10*time.Second {
		left := 0
		for _, p := range pids {
			if alive(p) {
				left++
			}
		}
		if left == 0 {
			return time.Since(start)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("procs still running 10s later: %v", pids)
	return 0
}

// TestNoOrphansAfterSIGKILL: kill the client of a two-level tree of procs;
// every proc exits: its children, children of a thread that is gone, get
// their Pdeathsig, and the grandchildren theirs in turn.
func TestNoOrphansAfterSIGKILL(t *testing.T) {
	cmd, pids := startTree(t)
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	t.Logf("4 procs in 2 levels gone %v after SIGKILL of the client", waitGone(t, pids).Round(time.Millisecond))
}

// TestCtrlC: SIGINT to the client tears everything down and exits 130.
func TestCtrlC(t *testing.T) {
	cmd, pids := startTree(t)
	cmd.Process.Signal(syscall.SIGINT)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 130 {
			t.Fatalf("client ended with %v, want exit status 130", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("client still running 15s after SIGINT")
	}
	t.Logf("procs gone %v after the client exited", waitGone(t, pids).Round(time.Millisecond))
}

// TestDefaultFaultHook: a failure nobody handles is printed and the client
// exits 1; under the default hook, the client also says how to take
// failures over, and not under a hook of the program's own.
func TestDefaultFaultHook(t *testing.T) {
	for _, tt := range []struct {
		helper, want string
		advice       bool
	}{
		{"failure", "monarch: unhandled failure: mesh unsupervised: actor unsupervised[0] {gpus: 0}", true},
		{"failure-own-hook", "monarch: unhandled failure: own hook: mesh unsupervised: actor unsupervised[0] {gpus: 0}", false},
	} {
		t.Run(tt.helper, func(t *testing.T) {
			cmd := helperCmd(t, tt.helper)
			var stderr strings.Builder
			cmd.Stderr = &stderr
			done := make(chan error, 1)
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			go func() { done <- cmd.Wait() }()
			select {
			case err := <-done:
				var ee *exec.ExitError
				if !errors.As(err, &ee) || ee.ExitCode() != 1 {
					t.Fatalf("client ended with %v, want exit status 1; stderr:\n%s", err, stderr.String())
				}
			case <-time.After(30 * time.Second):
				cmd.Process.Kill()
				t.Fatal("client still running 30s after an unhandled failure")
			}
			out := stderr.String()
			if !strings.Contains(out, tt.want) || !strings.Contains(out, "nobody catches this") ||
				strings.Contains(out, "actorrt.WithFaultHook takes them over") != tt.advice {
				t.Fatalf("stderr lacks %q (or the advice is wrongly %v):\n%s", tt.want, !tt.advice, out)
			}
		})
	}
}

// TestOneReportPerFailure: a member that fails and whose proc then dies is
// reported once.
func TestOneReportPerFailure(t *testing.T) {
	ctx := testCtx(t)
	procs := spawnProcs(t, actorrt.Dims{{"gpus", 1}})
	e := spawn[Echo](t, procs, "once")
	c := spawn[Crasher](t, procs, "once-crasher")
	if err := actorrt.VoidMethod1((*Echo).Fail).Broadcast(e, "first"); err != nil {
		t.Fatal(err)
	}
	waitFailure(t, "once")
	if err := actorrt.VoidMethod1((*Crasher).Crash).Broadcast(c, "kill"); err != nil {
		t.Fatal(err)
	}
	waitFailure(t, "once-crasher") // reported after the proc's end was processed
	failures.mu.Lock()
	defer failures.mu.Unlock()
	for _, f := range failures.all {
		if f.Mesh == "once" {
			t.Fatalf("a second report for the same member: %v", f)
		}
	}
	_ = ctx
}

// TestProcMeshStop: Stop ends the procs (SIGTERM, then SIGKILL after the
// grace period); it is not a failure, and calls after it fail clearly.
func TestProcMeshStop(t *testing.T) {
	ctx := testCtx(t)
	procs, err := actorrt.ThisHost(ctx).SpawnProcs(ctx, actorrt.Dims{{"gpus", 2}})
	if err != nil {
		t.Fatal(err)
	}
	c := spawn[Crasher](t, procs, "stopped-procs")
	pids, err := actorrt.Method((*Crasher).PID).Call(c).Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	blocked := actorrt.Method((*Crasher).Block).CallOne(c.At("gpus", 0))
	if err := procs.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	waitGone(t, pids.Values())
	// The call in flight ends either way: the endpoint sees its context end
	// and returns its error, or the proc is gone first (ErrStopped).
	var ae *actorrt.ActorError
	if _, err := blocked.Get(ctx); !errors.Is(err, actorrt.ErrStopped) && !errors.As(err, &ae) {
		t.Fatalf("call in flight at Stop: %v", err)
	}
	if _, err := actorrt.Method((*Crasher).PID).Call(c).Get(ctx); !errors.Is(err, actorrt.ErrStopped) {
		t.Fatalf("call after Stop: %v", err)
	}
	failures.mu.Lock()
	defer failures.mu.Unlock()
	for _, f := range failures.all {
		if f.Mesh == "stopped-procs" {
			t.Fatalf("Stop was reported as a failure: %v", f)
		}
	}
}

// helperGoOnHook is a client whose mesh, spawned with GoOnWithout and no
// restart policy, loses a member, under a fault hook that returns every
// failure as unhandled: the mesh goes on, so the job does not end. It
// prints the hook's failure and a call after it, waits a second more,
// and returns.
func helperGoOnHook() int {
	heard := make(chan *actorrt.MeshFailure, 8)
	hook := actorrt.WithFaultHook(func(f *actorrt.MeshFailure) error {
		heard <- f
		return fmt.Errorf("own hook: %w", f)
	})
	return actorrt.Run(func(ctx context.Context) error {
		procs, err := actorrt.ThisHost(ctx).SpawnProcs(ctx, actorrt.Dims{{"gpus", 2}})
		if err != nil {
			return err
		}
		e, err := actorrt.SpawnWith[Echo](ctx, procs, "goes-on", actorrt.SpawnOptions{GoOnWithout: true})
		if err != nil {
			return err
		}
		if err := actorrt.VoidMethod1((*Echo).Fail).Broadcast(e.At("gpus", 1), "lost one"); err != nil {
			return err
		}
		select {
		case f := <-heard:
			fmt.Println("HEARD", f.GoesOn, f)
		case <-time.After(30 * time.Second):
			return errors.New("the hook heard nothing")
		}
		v, err := actorrt.Method((*Echo).Ping).Call(e).Get(ctx)
		if err != nil {
			return err
		}
		fmt.Println("CALLED", v, v.Missing())
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-time.After(time.Second):
		}
		select {
		case f := <-heard:
			return fmt.Errorf("heard again: %v", f)
		default:
		}
		return nil
	}, hook)
}

// TestGoOnWithoutKeepsTheJob: the failure of a member of a mesh that goes
// on without it (GoOnWithout) reaches the fault hook once, and does not
// end the job even when the hook returns it as an error: the client goes
// on calling the mesh, which answers without the member, and exits 0.
func TestGoOnWithoutKeepsTheJob(t *testing.T) {
	cmd := helperCmd(t, "goon-hook")
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("client ended with %v, want exit status 0; stdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
		}
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		<-done
		t.Fatalf("client still running after 60s; stdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
	}
	out := stdout.String()
	for _, want := range []string{"HEARD true mesh goes-on: actor goes-on[1]", "lost one; its mesh goes on without it",
		"CALLED ValueMesh{gpus: 2} [1 missing] [{gpus: 1}]"} {
		if !strings.Contains(out, want) {
			t.Fatalf("stdout lacks %q:\n%s\nstderr:\n%s", want, out, stderr.String())
		}
	}
}
