package actorrt_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/monarch-go/monarch/actorrt"
)

// Accumulate over a mesh of 8 actors on 8 procs (issue 24, item 6).

func init() { mustRegister(actorrt.Register[Folder]()) }

// Folder answers Part with its rank + 1. The member at rank fail fails
// instead; the one at rank hold first waits for its proc's gate of that
// name, opened by Open on another mesh (a busy actor takes no message).
type Folder struct{}

var folderGates = struct {
	sync.Mutex
	m map[string]chan struct{}
}{m: map[string]chan struct{}{}}

func folderGate(name string) chan struct{} {
	folderGates.Lock()
	defer folderGates.Unlock()
	if folderGates.m[name] == nil {
		folderGates.m[name] = make(chan struct{})
	}
	return folderGates.m[name]
}

func (f *Folder) Part(ctx *actorrt.Context, fail, hold int, gate string) (int, error) {
	r := ctx.ActorInstance().Rank().Rank()
	if r == fail {
		return 0, fmt.Errorf("part %d fails", r)
	}
	if r == hold {
		select {
		case <-folderGate(gate):
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(30 * time.Second):
			return 0, fmt.Errorf("gate %s of rank %d never opened", gate, r)
		}
	}
	return r + 1, nil
}

func (f *Folder) Open(ctx *actorrt.Context, gate string) error {
	g := folderGate(gate)
	folderGates.Lock()
	defer folderGates.Unlock()
	select {
	case <-g:
	default:
		close(g)
	}
	return nil
}

var (
	foldPart = actorrt.Method3((*Folder).Part)
	foldOpen = actorrt.VoidMethod1((*Folder).Open)
)

func TestAccumulate(t *testing.T) {
	inProcess(t)
	procs := spawnProcs(t, actorrt.Dims{{"gpus", 8}})
	fold := spawn[Folder](t, procs, "fold")
	gates := spawn[Folder](t, procs, "fold-gates")
	sum := func(acc, v int) int { return acc + v }
	open := func(t *testing.T, ctx context.Context, gate string) {
		t.Helper()
		if _, err := foldOpen.CallOne(gates.At("gpus", 7), gate).Get(ctx); err != nil {
			t.Fatal(err)
		}
	}

	// The fold takes replies as they come: rank 7 answers only once its
	// gate is open, which combine does after the other seven.
	t.Run("sum", func(t *testing.T) {
		ctx := testCtx(t)
		var order []int
		total, err := actorrt.Accumulate(ctx, foldPart.Stream(fold, -1, 7, "sum"), 0, func(acc, v int) int {
			order = append(order, v)
			if len(order) == 7 {
				open(t, ctx, "sum")
			}
			return acc + v
		})
		if err != nil || total != 36 {
			t.Fatalf("Accumulate = %d, %v; want 36 (replies %v)", total, err, order)
		}
		if len(order) != 8 || order[7] != 8 {
			t.Fatalf("replies in the order %v, want rank 7's (8) last", order)
		}
		// The identity is the starting value, and R need not be T.
		s, err := actorrt.Accumulate(ctx, foldPart.Stream(fold, -1, -1, ""), "x", func(acc string, v int) string { return acc + "+" })
		if err != nil || s != "x++++++++" {
			t.Fatalf("Accumulate into a string = %q, %v", s, err)
		}
	})

	// A member's error ends the fold at once with that error, without
	// waiting for rank 7, still held; its reply is dropped when it comes.
	t.Run("error", func(t *testing.T) {
		ctx := testCtx(t)
		combined := 0
		start := time.Now()
		acc, err := actorrt.Accumulate(ctx, foldPart.Stream(fold, 3, 7, "error"), 0, func(acc, v int) int {
			combined += v
			return acc + v
		})
		var ae *actorrt.ActorError
		if !errors.As(err, &ae) || ae.Message != "part 3 fails" || ae.ActorID != "fold[3]" {
			t.Fatalf("Accumulate = %d, %v; want rank 3's error", acc, err)
		}
		if acc != combined || combined > 36-4-8 {
			t.Fatalf("with the error: %d, combined %d (want the fold of the replies before it)", acc, combined)
		}
		if d := time.Since(start); d > 20*time.Second {
			t.Fatalf("the error came after %v: the fold waited for the held member", d)
		}
		open(t, ctx, "error")
		// The mesh serves on: the late reply went nowhere.
		if total, err := actorrt.Accumulate(ctx, foldPart.Stream(fold, -1, -1, ""), 0, sum); err != nil || total != 36 {
			t.Fatalf("after the error: %d, %v", total, err)
		}
	})

	// ctx cancelled while rank 7 is held: the fold ends with ctx's error
	// and the fold of the seven replies it had.
	t.Run("cancel", func(t *testing.T) {
		ctx := testCtx(t)
		cctx, cancel := context.WithCancel(ctx)
		defer cancel()
		n := 0
		acc, err := actorrt.Accumulate(cctx, foldPart.Stream(fold, -1, 7, "cancel"), 0, func(acc, v int) int {
			if n++; n == 7 {
				cancel()
			}
			return acc + v
		})
		if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "7 of 8 replies") || acc != 28 {
			t.Fatalf("Accumulate = %d, %v; want 28 and context.Canceled after 7 of 8", acc, err)
		}
		open(t, ctx, "cancel")
		if total, err := actorrt.Accumulate(ctx, foldPart.Stream(fold, -1, -1, ""), 0, sum); err != nil || total != 36 {
			t.Fatalf("after the cancel: %d, %v", total, err)
		}
	})

	t.Run("bad input", func(t *testing.T) {
		ctx := testCtx(t)
		if _, err := actorrt.Accumulate[int, int](ctx, nil, 0, sum); !errors.Is(err, actorrt.ErrBadArgs) {
			t.Fatalf("nil stream: %v", err)
		}
		if _, err := actorrt.Accumulate[int, int](ctx, foldPart.Stream(fold, -1, -1, ""), 0, nil); !errors.Is(err, actorrt.ErrBadArgs) {
			t.Fatalf("nil combine: %v", err)
		}
	})
}
