package actorrt_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/monarch-go/monarch/actorrt"
)

// TestAdverbsDoNotWaitForRestart: the adverbs on a mesh whose member's
// proc ended while its restart has not settled (the new instance's Init
// is held) return at once; a Call's Get with a short ctx ends with that
// ctx's error; and the calls made meanwhile reach the members once the
// restart settled, in the order made: a later Broadcast to the member
// whose proc lives, which alone would need no wait, does not overtake
// an earlier one to the whole mesh. (Before, the adverbs waited for the
// restart to settle, up to the spawn timeout, on the runtime's context:
// the adverb did not return while Init was held.) CallOne and Stream go
// the same way.
func TestAdverbsDoNotWaitForRestart(t *testing.T) {
	ctx := testCtx(t)
	dir := t.TempDir()
	procs := spawnProcs(t, actorrt.Dims{{"gpus", 2}})
	policy := actorrt.RestartPolicy{MaxRestarts: 3, Window: time.Minute}
	m, err := actorrt.Init1((*Phoenix).Init).SpawnWith(ctx, procs, "phoenix-nowait", actorrt.SpawnOptions{Restart: &policy}, dir)
	if err != nil {
		t.Fatal(err)
	}
	hold := filepath.Join(dir, "hold-init")
	if err := os.WriteFile(hold, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(hold) })
	// Member 1's proc ends; its call fails once the client heard of it.
	if _, err := actorrt.VoidMethod((*Phoenix).Die).CallOne(m.At("gpus", 1)).Get(ctx); !errors.Is(err, actorrt.ErrProcFailed) {
		t.Fatalf("Die: %v, want ErrProcFailed", err)
	}

	appendEp := actorrt.VoidMethod1((*Phoenix).Append)
	var fut *actorrt.Future[actorrt.ValueMesh[int64]]
	var one *actorrt.Future[int64]
	var stream *actorrt.ReplyStream[int64]
	returned := make(chan error, 1)
	go func() {
		fut = phoenixNonce.Call(m)
		one = phoenixNonce.CallOne(m.At("gpus", 1))
		stream = phoenixNonce.Stream(m)
		err := appendEp.Broadcast(m, 1)
		if err == nil {
			err = appendEp.Broadcast(m.At("gpus", 0), 2)
		}
		returned <- err
	}()
	select {
	case err := <-returned:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		os.Remove(hold) // let it go, then say why
		t.Fatal("the adverbs waited for the restart to settle")
	}
	if _, err := os.Stat(hold); err != nil {
		t.Fatal("the restart was let go before the adverbs returned")
	}
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	_, err = fut.Get(short)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Get with a short ctx: %v, want its deadline", err)
	}

	os.Remove(hold)
	nonces, err := fut.Get(ctx)
	if err != nil || len(nonces.Values()) != 2 {
		t.Fatalf("the queued Call: %v, %v", nonces, err)
	}
	if n, err := one.Get(ctx); err != nil || n != nonces.Values()[1] {
		t.Fatalf("the queued CallOne to the restarted member: %v, %v; want %v", n, err, nonces.Values()[1])
	}
	streamed := 0
	for _, err := range stream.All(ctx) {
		if err != nil {
			t.Fatalf("the queued Stream: %v", err)
		}
		streamed++
	}
	if streamed != 2 {
		t.Fatalf("the queued Stream gave %d replies, want 2", streamed)
	}
	items, err := phoenixItems.Call(m).Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := items.Values()
	if !slices.Equal(got[0], []int{1, 2}) || !slices.Equal(got[1], []int{1}) {
		t.Fatalf("items %v: want [1 2] on member 0 (in the order sent) and [1] on the restarted member 1", got)
	}
}

// TestQueuedSendFailsToPort: a Send to a mesh whose member's proc ended
// and whose restarts are spent (the policy gave up on it) is queued while
// the sender asks the owner where the member is, and then cannot be sent:
// the port it was to answer on gets the error, naming the call, so its
// receiver does not wait for answers that never come. (Before, such a
// queued Send was only logged.)
func TestQueuedSendFailsToPort(t *testing.T) {
	ctx := testCtx(t)
	dir := t.TempDir()
	procs := spawnProcs(t, actorrt.Dims{{"gpus", 2}})
	policy := actorrt.RestartPolicy{MaxRestarts: 1, Window: time.Minute}
	m, err := actorrt.Init1((*Phoenix).Init).SpawnWith(ctx, procs, "phoenix-lostsend", actorrt.SpawnOptions{Restart: &policy}, dir)
	if err != nil {
		t.Fatal(err)
	}
	die := actorrt.VoidMethod((*Phoenix).Die)
	nonce := actorrt.Method((*Phoenix).Nonce)
	// The first end is restarted on a new proc; the second spends the
	// policy.
	for i := 0; i < 2; i++ {
		if _, err := die.CallOne(m.At("gpus", 1)).Get(ctx); !errors.Is(err, actorrt.ErrProcFailed) {
			t.Fatalf("Die %d: %v, want ErrProcFailed", i, err)
		}
		if i == 0 {
			if _, err := nonce.Call(m).Get(ctx); err != nil {
				t.Fatalf("after the first restart: %v", err)
			}
		}
	}
	port, recv := actorrt.OpenChannel[int64](ctx)
	defer recv.Close()
	if err := nonce.Send(m, port); err != nil {
		t.Fatalf("Send returned %v: the adverb does not wait for the owner's answer", err)
	}
	short, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	v, err := recv.Recv().Get(short)
	if err == nil || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("the port got %d, %v: want the queued Send's failure", v, err)
	}
	if !strings.Contains(err.Error(), "phoenix-lostsend.Nonce could not be sent") {
		t.Fatalf("the port's error %q does not say the call could not be sent", err)
	}
}
