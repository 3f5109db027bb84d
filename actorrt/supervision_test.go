package actorrt_test

import (
	"errors"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/monarch-go/monarch/actorrt"
)

// TestBroadcastErrorFailsTheActor: an error nobody receives stops that
// actor and reaches the mesh's owner (here the client, through its hook);
// the other members keep serving, the failed one answers ErrActorFailed.
func TestBroadcastErrorFailsTheActor(t *testing.T) {
	inProcess(t)
	ctx := testCtx(t)
	procs := spawnProcs(t, actorrt.Dims{{"gpus", 3}})
	echo := spawn[Echo](t, procs, "bcast-fail")
	if err := actorrt.VoidMethod1((*Echo).Fail).Broadcast(echo.At("gpus", 1), "no response"); err != nil {
		t.Fatal(err)
	}
	f := waitFailure(t, "bcast-fail")
	if f.ActorID != "bcast-fail[1]" || f.Rank().String() != "{gpus: 1}" || !strings.Contains(f.Reason, "no response") ||
		f.Err == nil || f.Err.Endpoint != "Fail" {
		t.Fatalf("failure %+v", f)
	}
	if _, err := actorrt.Method((*Echo).Ping).CallOne(echo.At("gpus", 1)).Get(ctx); !errors.Is(err, actorrt.ErrActorFailed) {
		t.Fatalf("call to the failed actor: %v", err)
	}
	v, err := actorrt.Method((*Echo).Ping).Call(echo.Slice("gpus", 2, 3)).Get(ctx)
	if err != nil || v.Len() != 1 {
		t.Fatalf("call to a live member: %v, %v", v, err)
	}
	// A panic with no reply fails the actor the same way.
	if err := actorrt.VoidMethod((*Echo).Panic).Broadcast(echo.At("gpus", 0)); err != nil {
		t.Fatal(err)
	}
	if f := waitFailure(t, "bcast-fail"); !errors.Is(f.Err, actorrt.ErrPanic) || !strings.Contains(f.Err.Stack, "Panic") {
		t.Fatalf("panic failure %+v", f)
	}
}

// TestProcDeath kills procs three ways. In-flight calls to their actors
// fail with a supervision error, later calls fail at once naming the dead
// rank, slices without it keep working, the owner hears of it, and the
// host spawns again.
func TestProcDeath(t *testing.T) {
	for _, how := range []string{"exit", "kill", "segv"} {
		t.Run(how, func(t *testing.T) {
			ctx := testCtx(t)
			procs := spawnProcs(t, actorrt.Dims{{"gpus", 3}})
			c := spawn[Crasher](t, procs, "crash-"+how)
			blocked := actorrt.Method((*Crasher).Block).CallOne(c.At("gpus", 1))
			if _, err := actorrt.Method((*Crasher).PID).CallOne(c.At("gpus", 2)).Get(ctx); err != nil {
				t.Fatal(err) // the Block call is in by now: same sender, same proc order
			}
			start := time.Now()
			// The crash goes to another actor on the same proc: a second
			// mesh, so the blocked one stays blocked.
			c2 := spawn[Crasher](t, procs, "crash2-"+how)
			if err := actorrt.VoidMethod1((*Crasher).Crash).Broadcast(c2.At("gpus", 1), how); err != nil {
				t.Fatal(err)
			}
			_, err := blocked.Get(ctx)
			took := time.Since(start)
			if !errors.Is(err, actorrt.ErrProcFailed) {
				t.Fatalf("in-flight call: %v, want ErrProcFailed", err)
			}
			if took > 5*time.Second {
				t.Fatalf("in-flight call failed after %v, want under 5s", took)
			}
			t.Logf("%s: in-flight call failed %v after the crash was sent: %v", how, took.Round(time.Millisecond), err)
			_, err = actorrt.Method((*Crasher).PID).Call(c).Get(ctx)
			if !errors.Is(err, actorrt.ErrProcFailed) || !strings.Contains(err.Error(), "{gpus: 1}") {
				t.Fatalf("later call: %v, want ErrProcFailed naming {gpus: 1}", err)
			}
			if v, err := actorrt.Method((*Crasher).PID).Call(c.Slice("gpus", 2, 3)).Get(ctx); err != nil || v.Len() != 1 {
				t.Fatalf("slice without the dead rank: %v, %v", v, err)
			}
			if f := waitFailure(t, "crash-"+how); f.Rank().String() != "{gpus: 1}" || !strings.Contains(f.Reason, "proc ended") {
				t.Fatalf("owner got %v", f)
			}
			waitFailure(t, "crash2-"+how)
			again := spawnProcs(t, actorrt.Dims{{"gpus", 1}})
			e := spawn[Echo](t, again, "after-"+how)
			if v, err := actorrt.Method((*Echo).Ping).CallOne(e).Get(ctx); err != nil || v != 1 {
				t.Fatalf("a new proc after the crash: %v, %v", v, err)
			}
		})
	}
}

// TestSupervise: the supervisor actor owns the workers; a worker's failure
// goes to its Supervise, which calls another actor before answering.
// Handled, the supervisor lives on; not handled, it fails and the client
// hears of the supervisor's failure.
func TestSupervise(t *testing.T) {
	inProcess(t)
	ctx := testCtx(t)
	procs := spawnProcs(t, actorrt.Dims{{"gpus", 2}})
	for _, handle := range []bool{true, false} {
		name := map[bool]string{true: "sup-handles", false: "sup-escalates"}[handle]
		sup := spawn[Supervisor](t, actorrt.ThisProc(ctx), name, handle)
		if _, err := actorrt.VoidMethod2((*Supervisor).SpawnWorkers).CallOne(sup, procs, name+"-w").Get(ctx); err != nil {
			t.Fatal(err)
		}
		workers, err := actorrt.Method((*Supervisor).Workers).CallOne(sup).Get(ctx)
		if err != nil {
			t.Fatal(err)
		}
		// The failure happens through a slice held by the client, which
		// does not own the mesh: the owner is told.
		if err := actorrt.VoidMethod1((*Echo).Fail).Broadcast(workers.At("gpus", 1), "worker broke"); err != nil {
			t.Fatal(err)
		}
		if handle {
			var seen []string
			for deadline := time.Now().Add(20 * time.Second); len(seen) == 0 && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
				if seen, err = actorrt.Method((*Supervisor).Seen).CallOne(sup).Get(ctx); err != nil {
					t.Fatal(err)
				}
			}
			if len(seen) != 1 || !strings.HasPrefix(seen[0], "seen "+name+"-w[1]|{gpus: 1}|Fail error: worker broke") {
				t.Fatalf("supervisor saw %q", seen)
			}
			// Still alive, and its other worker too.
			if v, err := actorrt.Method((*Echo).Ping).CallOne(workers.At("gpus", 0)).Get(ctx); err != nil || v != 1 {
				t.Fatalf("other worker: %v", err)
			}
		} else {
			f := waitFailure(t, name)
			if f.ActorID != name+"[0]" || !strings.Contains(f.Reason, "did not handle") || !strings.Contains(f.Reason, "worker broke") {
				t.Fatalf("escalated failure %v", f)
			}
			if _, err := actorrt.Method((*Supervisor).Seen).CallOne(sup).Get(ctx); !errors.Is(err, actorrt.ErrActorFailed) {
				t.Fatalf("failed supervisor answered: %v", err)
			}
			// A failed owner's meshes stop with it.
			if _, err := actorrt.Method((*Echo).Ping).CallOne(workers.At("gpus", 0)).Get(ctx); !errors.Is(err, actorrt.ErrStopped) {
				t.Fatalf("worker of a failed owner: %v", err)
			}
		}
	}
}

// TestOwnershipStaysWithTheCreator: an actor that holds a reference to the
// supervisor's workers breaks one; the supervisor is told, not the holder.
func TestOwnershipStaysWithTheCreator(t *testing.T) {
	inProcess(t)
	ctx := testCtx(t)
	procs := spawnProcs(t, actorrt.Dims{{"gpus", 2}})
	sup := spawn[Supervisor](t, actorrt.ThisProc(ctx), "owner", true)
	if _, err := actorrt.VoidMethod2((*Supervisor).SpawnWorkers).CallOne(sup, procs, "owned").Get(ctx); err != nil {
		t.Fatal(err)
	}
	workers, err := actorrt.Method((*Supervisor).Workers).CallOne(sup).Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	breaker := spawn[Breaker](t, procs, "breaker")
	if _, err := actorrt.VoidMethod2((*Breaker).Break).CallOne(breaker.At("gpus", 0), workers.Slice("gpus", 0, 1), "broken by a holder").Get(ctx); err != nil {
		t.Fatal(err)
	}
	var seen []string
	for deadline := time.Now().Add(20 * time.Second); len(seen) == 0 && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		seen, _ = actorrt.Method((*Supervisor).Seen).CallOne(sup).Get(ctx)
	}
	if len(seen) != 1 || !strings.Contains(seen[0], "broken by a holder") {
		t.Fatalf("owner saw %q", seen)
	}
	// The breaker (the holder) did not fail: it still answers.
	if _, err := actorrt.VoidMethod2((*Breaker).Break).Call(breaker, workers.Slice("gpus", 1, 2), "again").Get(ctx); err != nil {
		t.Fatalf("breaker: %v", err)
	}
}

// TestHostLoss: an agent (a proc that started procs) stops answering: its
// procs are declared failed within the host timeout.
func TestHostLoss(t *testing.T) {
	ctx := testCtx(t)
	outer := spawnProcs(t, actorrt.Dims{{"hosts", 1}})
	starter := spawn[Starter](t, outer, "starter")
	inner, err := actorrt.Method((*Starter).Start).CallOne(starter).Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	e := spawn[Crasher](t, inner, "behind-lost-host")
	blocked := actorrt.Method((*Crasher).Block).CallOne(e)
	agentPID, err := actorrt.Method((*Starter).PID).CallOne(starter).Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	syscall.Kill(agentPID, syscall.SIGSTOP)
	defer syscall.Kill(agentPID, syscall.SIGCONT)
	_, err = blocked.Get(ctx)
	took := time.Since(start)
	// Its agent is found out two ways, whichever is first: its
	// heartbeats stop ("silent"), or its own agent kills it for showing
	// no life ("unresponsive").
	if !errors.Is(err, actorrt.ErrProcFailed) || !strings.Contains(err.Error(), "silent") && !strings.Contains(err.Error(), "unresponsive") {
		t.Fatalf("call behind a lost host: %v", err)
	}
	if took > 10*time.Second {
		t.Fatalf("host loss declared after %v, want under 10s", took)
	}
	t.Logf("host loss declared %v after the agent stopped", took.Round(time.Millisecond))
	waitFailure(t, "behind-lost-host")
}

// Starter starts procs from its own host agent.
type Starter struct{ procs *actorrt.ProcMesh }

func (s *Starter) Start(ctx *actorrt.Context) (*actorrt.ProcMesh, error) {
	var err error
	s.procs, err = actorrt.ThisHost(ctx).SpawnProcs(ctx, actorrt.Dims{{"inner", 1}})
	return s.procs, err
}

func (s *Starter) PID(ctx *actorrt.Context) (int, error) { return os.Getpid(), nil }
