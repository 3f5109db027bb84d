package actorrt_test

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/monarch-go/monarch/actorrt"
)

// Crasher ends its own proc in various ways, or blocks.
type Crasher struct{}

func (c *Crasher) Crash(ctx *actorrt.Context, how string) error {
	switch how {
	case "exit":
		os.Exit(1)
	case "kill":
		syscall.Kill(os.Getpid(), syscall.SIGKILL)
	case "segv":
		syscall.Kill(os.Getpid(), syscall.SIGSEGV)
	}
	time.Sleep(time.Minute)
	return nil
}

// Block waits until the actor stops (or a minute).
func (c *Crasher) Block(ctx *actorrt.Context) (int, error) {
	select {
	case <-ctx.Done():
	case <-time.After(time.Minute):
	}
	return 0, errors.New("unblocked")
}

func (c *Crasher) PID(ctx *actorrt.Context) (int, error) { return os.Getpid(), nil }

// Supervisor owns a mesh of workers and supervises it.
type Supervisor struct {
	workers *actorrt.ActorMesh[Echo]
	handle  bool
	helper  *actorrt.ActorMesh[Echo]
	mu      sync.Mutex
	seen    []string
}

func (s *Supervisor) Init(ctx *actorrt.Context, handle bool) error {
	s.handle = handle
	return nil
}

// SpawnWorkers spawns the workers (owned by this actor) and a helper that
// Supervise calls.
func (s *Supervisor) SpawnWorkers(ctx *actorrt.Context, procs *actorrt.ProcMesh, name string) error {
	var err error
	if s.workers, err = actorrt.Spawn[Echo](ctx, procs, name); err != nil {
		return err
	}
	s.helper, err = actorrt.Spawn[Echo](ctx, actorrt.ThisProc(ctx), name+"-helper")
	return err
}

func (s *Supervisor) Workers(ctx *actorrt.Context) (*actorrt.ActorMesh[Echo], error) {
	return s.workers, nil
}

// Supervise records the failure after a call to another actor (which must
// not deadlock), and handles it or not as told at Init.
func (s *Supervisor) Supervise(ctx *actorrt.Context, f *actorrt.MeshFailure) bool {
	said, err := actorrt.Method1((*Echo).Say).CallOne(s.helper, "seen "+f.ActorID).Get(ctx)
	if err != nil {
		said = "helper failed: " + err.Error()
	}
	s.mu.Lock()
	s.seen = append(s.seen, fmt.Sprintf("%s|%v|%s", said, f.Rank(), f.Reason))
	s.mu.Unlock()
	return s.handle
}

func (s *Supervisor) Seen(ctx *actorrt.Context) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.seen...), nil
}

// Breaker breaks a mesh it was given (but does not own).
type Breaker struct{}

func (b *Breaker) Break(ctx *actorrt.Context, m *actorrt.ActorMesh[Echo], msg string) error {
	return actorrt.VoidMethod1((*Echo).Fail).Broadcast(m, msg)
}
