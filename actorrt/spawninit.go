package actorrt

import (
	"context"
	"fmt"
	"reflect"
	"runtime"
	"strings"
)

// A spawn with Init arguments, checked by the compiler. Init1, Init2 and
// Init3 bind an actor type's Init from its method expression, as Method1
// binds an endpoint:
//
//	counters, err := actorrt.Init1((*Counter).Init).Spawn(ctx, procs, "counters", 0)
//
// The result's Spawn, SpawnWith and GetOrSpawn take Init's parameters as
// typed as Init declares them, so a wrong argument does not compile, and
// an untyped constant takes Init's type (1 for a float64 or a named string
// type is fine). Spawn[T] and the others with ...any check the same at the
// call, by reflection, before any proc does work.

// Spawner1 spawns meshes of actor type A whose Init takes one argument of
// type T1, bound once from the method expression (*A).Init (see Init1).
// It is a small value, safe to copy and to use from many goroutines. The
// zero Spawner1 is bound to nothing: its spawns fail with ErrBadEndpoint.
type Spawner1[A, T1 any] struct{ b binding }

// Init1 binds init, the method expression (*A).Init of an Init that takes
// one argument, for spawns whose argument the compiler checks:
//
//	actorrt.Init1((*Counter).Init).Spawn(ctx, procs, "counters", 0)
//
// It is cheap; bind once in a package-level var or at the call. That init
// is A's Init, and not another method of its shape, is checked at each
// spawn, before any proc does work (ErrBadEndpoint).
func Init1[A, T1 any](init func(*A, *Context, T1) error) Spawner1[A, T1] {
	return Spawner1[A, T1]{bind(init)}
}

// Spawn is Spawn[A] with a1 for Init: see Spawn for what it does and when
// it returns.
func (s Spawner1[A, T1]) Spawn(ctx context.Context, procs *ProcMesh, name string, a1 T1) (*ActorMesh[A], error) {
	return spawnBound[A](ctx, procs, name, SpawnOptions{}, s.b, []any{a1})
}

// SpawnWith is SpawnWith[A] with a1 for Init: members per proc, a restart
// policy (whose restarts run Init again with a1).
func (s Spawner1[A, T1]) SpawnWith(ctx context.Context, procs *ProcMesh, name string, opts SpawnOptions, a1 T1) (*ActorMesh[A], error) {
	return spawnBound[A](ctx, procs, name, opts, s.b, []any{a1})
}

// GetOrSpawn is GetOrSpawn[A] with a1 for Init: the job's singleton named
// name, spawned at the name's first use.
func (s Spawner1[A, T1]) GetOrSpawn(ctx context.Context, name string, a1 T1) (*ActorMesh[A], error) {
	return getOrSpawnBound[A](ctx, name, s.b, []any{a1})
}

// Spawner2 is Spawner1 for an Init of two arguments (see Init2).
type Spawner2[A, T1, T2 any] struct{ b binding }

// Init2 is Init1 for an Init of two arguments:
//
//	actorrt.Init2((*Journal).Init).Spawn(ctx, procs, "journals", dir, "sync")
func Init2[A, T1, T2 any](init func(*A, *Context, T1, T2) error) Spawner2[A, T1, T2] {
	return Spawner2[A, T1, T2]{bind(init)}
}

// Spawn is Spawn[A] with a1 and a2 for Init.
func (s Spawner2[A, T1, T2]) Spawn(ctx context.Context, procs *ProcMesh, name string, a1 T1, a2 T2) (*ActorMesh[A], error) {
	return spawnBound[A](ctx, procs, name, SpawnOptions{}, s.b, []any{a1, a2})
}

// SpawnWith is SpawnWith[A] with a1 and a2 for Init.
func (s Spawner2[A, T1, T2]) SpawnWith(ctx context.Context, procs *ProcMesh, name string, opts SpawnOptions, a1 T1, a2 T2) (*ActorMesh[A], error) {
	return spawnBound[A](ctx, procs, name, opts, s.b, []any{a1, a2})
}

// GetOrSpawn is GetOrSpawn[A] with a1 and a2 for Init.
func (s Spawner2[A, T1, T2]) GetOrSpawn(ctx context.Context, name string, a1 T1, a2 T2) (*ActorMesh[A], error) {
	return getOrSpawnBound[A](ctx, name, s.b, []any{a1, a2})
}

// Spawner3 is Spawner1 for an Init of three arguments (see Init3). An
// Init of more takes a struct.
type Spawner3[A, T1, T2, T3 any] struct{ b binding }

// Init3 is Init1 for an Init of three arguments.
func Init3[A, T1, T2, T3 any](init func(*A, *Context, T1, T2, T3) error) Spawner3[A, T1, T2, T3] {
	return Spawner3[A, T1, T2, T3]{bind(init)}
}

// Spawn is Spawn[A] with a1, a2 and a3 for Init.
func (s Spawner3[A, T1, T2, T3]) Spawn(ctx context.Context, procs *ProcMesh, name string, a1 T1, a2 T2, a3 T3) (*ActorMesh[A], error) {
	return spawnBound[A](ctx, procs, name, SpawnOptions{}, s.b, []any{a1, a2, a3})
}

// SpawnWith is SpawnWith[A] with a1, a2 and a3 for Init.
func (s Spawner3[A, T1, T2, T3]) SpawnWith(ctx context.Context, procs *ProcMesh, name string, opts SpawnOptions, a1 T1, a2 T2, a3 T3) (*ActorMesh[A], error) {
	return spawnBound[A](ctx, procs, name, opts, s.b, []any{a1, a2, a3})
}

// GetOrSpawn is GetOrSpawn[A] with a1, a2 and a3 for Init.
func (s Spawner3[A, T1, T2, T3]) GetOrSpawn(ctx context.Context, name string, a1 T1, a2 T2, a3 T3) (*ActorMesh[A], error) {
	return getOrSpawnBound[A](ctx, name, s.b, []any{a1, a2, a3})
}

// spawnBound spawns a mesh of A once b is known to be A's Init.
func spawnBound[A any](ctx context.Context, procs *ProcMesh, name string, opts SpawnOptions, b binding, args []any) (*ActorMesh[A], error) {
	if err := checkInitBinding[A](b); err != nil {
		return nil, fmt.Errorf("actorrt: Spawn[%s] %q: %w", shortName(typeName(reflect.TypeFor[A]())), name, err)
	}
	return spawnTyped[A](ctx, procs, name, opts, args)
}

// getOrSpawnBound is GetOrSpawn[A] once b is known to be A's Init.
func getOrSpawnBound[A any](ctx context.Context, name string, b binding, args []any) (*ActorMesh[A], error) {
	if err := checkInitBinding[A](b); err != nil {
		return nil, fmt.Errorf("actorrt: GetOrSpawn[%s] %q: %w", shortName(typeName(reflect.TypeFor[A]())), name, err)
	}
	return GetOrSpawn[A](ctx, name, args...)
}

// checkInitBinding tells whether b, bound by Init1 (Init2, Init3), is the
// method expression (*A).Init: the compiler saw its shape, not its name.
func checkInitBinding[A any](b binding) error {
	t := reflect.TypeFor[A]()
	if b.fn == nil {
		return fmt.Errorf("%w: the zero Spawner (bind one with actorrt.Init1((*%s).Init))", ErrBadEndpoint, t.Name())
	}
	full := runtime.FuncForPC(reflect.ValueOf(b.fn).Pointer()).Name()
	recv := ".(*" + stripTypeArgs(t.Name()) + ").Init"
	if !strings.HasSuffix(stripTypeArgs(full), recv) || !strings.HasPrefix(full, t.PkgPath()+".") {
		return fmt.Errorf("%w: %s is not the Init of %s (bind (*%s).Init)", ErrBadEndpoint, full, typeName(t), t.Name())
	}
	return nil
}

// checkInitArgs matches the arguments of an untyped spawn (Spawn,
// SpawnWith, SpawnPerProc, GetOrSpawn) to the actor's Init by their types,
// in the caller, before any proc does work: an argument is refused unless
// its type is assignable to the parameter's (an int for an int64 or a
// float64 parameter is refused; the typed Init1 converts a constant), and
// a nil one unless the parameter is a pointer, slice or map.
func checkInitArgs(at *actorType, args []any) error {
	short := shortName(at.name)
	if at.init == nil {
		if len(args) > 0 {
			return fmt.Errorf("%w: given %s, but %s has no Init method to take them", ErrBadArgs, typesOf(args), short)
		}
		return nil
	}
	want := at.init.args
	sig := short + ".Init(" + strings.Join(append([]string{"*Context"}, typeStrings(want)...), ", ") + ")"
	hint := ""
	if n := len(want); n >= 1 && n <= 3 {
		hint = fmt.Sprintf(" (spawn with actorrt.Init%d((*%s).Init) to have the compiler check them)", n, at.typ.Name())
	}
	if len(args) != len(want) {
		return fmt.Errorf("%w: %s takes %s, given %s%s", ErrBadArgs, sig, arguments(len(want)), typesOf(args), hint)
	}
	for i, a := range args {
		if a == nil {
			switch want[i].Kind() {
			case reflect.Pointer, reflect.Slice, reflect.Map:
				continue
			}
			return fmt.Errorf("%w: parameter %d of %s is %s, given nil%s", ErrBadArgs, i+1, sig, want[i], hint)
		}
		if t := reflect.TypeOf(a); !t.AssignableTo(want[i]) {
			return fmt.Errorf("%w: parameter %d of %s is %s, given %s%s", ErrBadArgs, i+1, sig, want[i], t, hint)
		}
	}
	return nil
}

// typesOf tells the number and types of args: "2 arguments (int,
// string)", a nil one as nil.
func typesOf(args []any) string {
	if len(args) == 0 {
		return "none"
	}
	s := make([]string, len(args))
	for i, a := range args {
		s[i] = "nil"
		if a != nil {
			s[i] = reflect.TypeOf(a).String()
		}
	}
	return arguments(len(args)) + " (" + strings.Join(s, ", ") + ")"
}

func arguments(n int) string {
	if n == 1 {
		return "1 argument"
	}
	return fmt.Sprintf("%d arguments", n)
}

func typeStrings(ts []reflect.Type) []string {
	s := make([]string, len(ts))
	for i, t := range ts {
		s[i] = t.String()
	}
	return s
}
