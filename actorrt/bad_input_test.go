package actorrt_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/monarch-go/monarch/actorrt"
)

// Every bad input gets an error value naming the problem: never a panic,
// never a hang.

func TestRegisterRefusesBadEndpoints(t *testing.T) {
	tests := []struct {
		name     string
		register func(...actorrt.RegisterOption) error
		mention  string
	}{
		{"result without error", actorrt.Register[BadResult], "BadResult.Get returns (int)"},
		{"channel parameter", actorrt.Register[BadParam], "chan"},
		{"interface parameter", actorrt.Register[BadInterface], "interface"},
		{"Init returning a value", actorrt.Register[BadInit], "Init must return only error"},
		{"pointer type", actorrt.Register[*Counter], "not Register[*Counter]"},
		{"twice", actorrt.Register[Counter], "registered twice"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.register()
			if err == nil || !contains(err.Error(), tt.mention) {
				t.Fatalf("err = %v, want one that mentions %q", err, tt.mention)
			}
		})
	}
}

func TestBadInput(t *testing.T) {
	inProcess(t)
	ctx := testCtx(t)
	procs := spawnProcs(t, actorrt.Dims{{"gpus", 2}})
	counters := spawn[Counter](t, procs, "bad-input", 0)
	echo := spawn[Echo](t, procs, "bad-input-echo")

	t.Run("unregistered type", func(t *testing.T) {
		_, err := actorrt.Spawn[NeverRegistered](ctx, procs, "never")
		if !errors.Is(err, actorrt.ErrNotRegistered) || !contains(err.Error(), "Register[NeverRegistered]") {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("type whose Register failed", func(t *testing.T) {
		_, err := actorrt.Spawn[BadResult](ctx, procs, "bad")
		if !errors.Is(err, actorrt.ErrNotRegistered) || !contains(err.Error(), "Register failed") {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("name already used", func(t *testing.T) {
		_, err := actorrt.Spawn[Counter](ctx, procs, "bad-input", 0)
		if !errors.Is(err, actorrt.ErrNameTaken) {
			t.Fatalf("err = %v", err)
		}
		// The failed spawn left the first mesh alone.
		if v, err := actorrt.Method((*Counter).GetValue).Call(counters).Get(ctx); err != nil || v.Len() != 2 {
			t.Fatalf("first mesh after a refused spawn: %v, %v", v, err)
		}
	})
	t.Run("wrong Init arguments", func(t *testing.T) {
		for _, args := range [][]any{{}, {"zero"}, {1, 2}} {
			if _, err := actorrt.Spawn[Counter](ctx, procs, "args", args...); !errors.Is(err, actorrt.ErrBadArgs) {
				t.Errorf("Spawn(%v) err = %v", args, err)
			}
		}
	})
	t.Run("bad name", func(t *testing.T) {
		if _, err := actorrt.Spawn[Echo](ctx, procs, "a.b"); !errors.Is(err, actorrt.ErrBadArgs) {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("argument that cannot be decoded", func(t *testing.T) {
		_, err := actorrt.VoidMethod1((*Echo).Take).CallOne(echo.At("gpus", 0), Picky{}).Get(ctx)
		if !errors.Is(err, actorrt.ErrDecode) || !contains(err.Error(), "argument 1") {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("CallOne on two actors", func(t *testing.T) {
		_, err := actorrt.Method((*Counter).GetValue).CallOne(counters).Get(ctx)
		if !errors.Is(err, actorrt.ErrNotOne) || !contains(err.Error(), "{gpus: 2}") {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("slice out of range", func(t *testing.T) {
		for _, m := range []*actorrt.ActorMesh[Counter]{
			counters.Slice("gpus", 0, 3),
			counters.Slice("hosts", 0, 1),
			counters.At("gpus", 2),
			counters.At("gpus", 0).Slice("gpus", 0, 1),
		} {
			if !errors.Is(m.Err(), actorrt.ErrOutOfRange) {
				t.Errorf("Err() = %v", m.Err())
			}
			if err := actorrt.VoidMethod((*Counter).Increment).Broadcast(m); !errors.Is(err, actorrt.ErrOutOfRange) {
				t.Errorf("Broadcast err = %v", err)
			}
			if _, err := actorrt.Method((*Counter).GetValue).Call(m).Get(ctx); !errors.Is(err, actorrt.ErrOutOfRange) {
				t.Errorf("Call err = %v", err)
			}
		}
		if err := procs.Slice("gpus", 1, 5).Err(); !errors.Is(err, actorrt.ErrOutOfRange) {
			t.Errorf("ProcMesh slice err = %v", err)
		}
	})
	t.Run("function that is not an endpoint", func(t *testing.T) {
		notMethod := func(c *Counter, ctx *actorrt.Context) (int, error) { return 0, nil }
		if _, err := actorrt.Method(notMethod).Call(counters).Get(ctx); !errors.Is(err, actorrt.ErrBadEndpoint) {
			t.Fatalf("err = %v", err)
		}
		if _, err := actorrt.Method[Counter, int](nil).Call(counters).Get(ctx); !errors.Is(err, actorrt.ErrBadEndpoint) {
			t.Fatalf("nil endpoint err = %v", err)
		}
		var zero actorrt.Endpoint[Counter, int]
		if _, err := zero.Call(counters).Get(ctx); !errors.Is(err, actorrt.ErrBadEndpoint) {
			t.Fatalf("zero endpoint err = %v", err)
		}
	})
	t.Run("bad extent", func(t *testing.T) {
		if _, err := actorrt.ThisHost(ctx).SpawnProcs(ctx, actorrt.Dims{{"gpus", 0}}); !errors.Is(err, actorrt.ErrBadExtent) {
			t.Fatalf("err = %v", err)
		}
		if _, err := actorrt.SpawnPerProc[Echo](ctx, procs, "dup-dim", actorrt.Dims{{"gpus", 2}}); !errors.Is(err, actorrt.ErrBadExtent) {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("nil meshes", func(t *testing.T) {
		if _, err := actorrt.Spawn[Echo](ctx, nil, "x"); err == nil {
			t.Fatal("Spawn on a nil ProcMesh succeeded")
		}
		var m *actorrt.ActorMesh[Echo]
		if _, err := actorrt.Method((*Echo).Ping).CallOne(m).Get(ctx); err == nil {
			t.Fatal("CallOne on a nil mesh succeeded")
		}
	})
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }
