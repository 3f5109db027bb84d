package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/monarch-go/monarch/actorrt"
)

// Errorful refuses to say hello.
type Errorful struct{}

func (e *Errorful) SayHello(ctx *actorrt.Context) error {
	//lint:ignore ST1005 the guide's own words
	return errors.New("I don't want to")
}

// SupervisorActor owns a mesh of Errorful actors and handles their
// failures.
type SupervisorActor struct {
	children *actorrt.ActorMesh[Errorful]
	failures int
}

// SpawnChildren spawns a mesh owned by this actor (it is spawned while
// this actor's endpoint runs).
func (s *SupervisorActor) SpawnChildren(ctx *actorrt.Context, procs *actorrt.ProcMesh) error {
	var err error
	s.children, err = actorrt.Spawn[Errorful](ctx, procs, "supervised")
	return err
}

// Provoke asks a child to say hello with no way to answer: its error has
// nowhere to go but to this actor, its owner.
func (s *SupervisorActor) Provoke(ctx *actorrt.Context) error {
	return actorrt.VoidMethod((*Errorful).SayHello).Broadcast(s.children.Slice("gpus", 0, 1))
}

// Supervise receives failures of the meshes this actor owns. Returning
// true handles them; false would fail this actor too, and pass the failure
// to its own owner.
func (s *SupervisorActor) Supervise(ctx *actorrt.Context, failure *actorrt.MeshFailure) bool {
	s.failures++
	fmt.Printf("Failure received: %v\n", failure)
	return true
}

func (s *SupervisorActor) Failures(ctx *actorrt.Context) (int, error) { return s.failures, nil }

// supervision: The Supervision Tree, Broadcasting Without Response,
// Fine-grained Supervision.
func supervision(ctx context.Context, trainerProcs *actorrt.ProcMesh) error {
	heading("The supervision tree")
	e, err := actorrt.Spawn[Errorful](ctx, actorrt.ThisProc(ctx), "errorful")
	if err != nil {
		return err
	}
	if _, err := actorrt.VoidMethod((*Errorful).SayHello).CallOne(e).Get(ctx); err != nil {
		var ae *actorrt.ActorError
		if errors.As(err, &ae) {
			fmt.Printf("It didn't say hello (%s.%s: %s)\n", ae.ActorID, ae.Endpoint, ae.Message)
		}
	}

	heading("Fine-grained supervision")
	sup, err := actorrt.Spawn[SupervisorActor](ctx, actorrt.ThisProc(ctx), "supervisor")
	if err != nil {
		return err
	}
	if _, err := actorrt.VoidMethod1((*SupervisorActor).SpawnChildren).CallOne(sup, trainerProcs).Get(ctx); err != nil {
		return err
	}
	if _, err := actorrt.VoidMethod((*SupervisorActor).Provoke).CallOne(sup).Get(ctx); err != nil {
		return err
	}
	// The failure reaches the supervisor on its own: wait for it.
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if n, err := actorrt.Method((*SupervisorActor).Failures).CallOne(sup).Get(ctx); err != nil || n > 0 {
			break
		}
	}

	heading("The unhandled fault hook")
	// A failure of a mesh the client owns reaches the client's fault hook:
	// this program's is unhandled (below), set in main.
	if err := actorrt.VoidMethod((*Errorful).SayHello).Broadcast(e); err != nil { // no response expected
		return err
	}
	select {
	case <-unhandledSeen:
	case <-time.After(10 * time.Second):
		return errors.New("the failure did not reach the hook")
	}
	return nil
}

// unhandled is this program's fault hook (actorrt.WithFaultHook, in main):
// a failure of a mesh the client owns, or one no owner handled, comes
// here. It logs the failure and ignores it; the default hook prints it
// and exits 1.
func unhandled(failure *actorrt.MeshFailure) error {
	fmt.Printf("Mesh failure was not handled: %v\n", failure)
	select {
	case unhandledSeen <- struct{}{}:
	default:
	}
	return nil
}

// unhandledSeen tells the supervision section that the hook ran.
var unhandledSeen = make(chan struct{}, 1)
