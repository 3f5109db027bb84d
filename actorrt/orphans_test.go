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
