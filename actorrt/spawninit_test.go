package actorrt_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/monarch-go/monarch/actorrt"
)

// Tag is a named string type: a Spawn with ...any given "x" for it is
// refused (a string is not a Tag), where Init3 converts the constant.
type Tag string

// Marker notes each Init in a file: a line "<tag> <weight>" per instance,
// so a test can tell whether (and how often) Init ran.
type Marker struct {
	tag    Tag
	weight float64
}

func (m *Marker) Init(ctx *actorrt.Context, path string, weight float64, tag Tag) error {
	m.tag, m.weight = tag, weight
	return appendLine(path, fmt.Sprintf("%s %g", tag, weight))
}

// Note has the shape of Init, so Init3 takes it: the spawn refuses it.
func (m *Marker) Note(ctx *actorrt.Context, path string, weight float64, tag Tag) error {
	return appendLine(path, "note")
}

func (m *Marker) Weight(ctx *actorrt.Context) (float64, error) { return m.weight, nil }

var (
	markerInit = actorrt.Init3((*Marker).Init)
	weight     = actorrt.Method((*Marker).Weight)
)

// lines reads path's lines, sorted; none if it does not exist.
func lines(t *testing.T, path string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	l := strings.FieldsFunc(string(data), func(r rune) bool { return r == '\n' })
	slices.Sort(l)
	return l
}

// TestTypedSpawn: Init1 and Init3 spawn with arguments the compiler
// checked (a constant 1 for a float64, "b" for a Tag), plain, with
// options and as a singleton; a method of Init's shape that is not Init,
// or the zero Spawner, is refused before any Init runs.
func TestTypedSpawn(t *testing.T) {
	inProcess(t)
	ctx := testCtx(t)
	procs := spawnProcs(t, actorrt.Dims{{"gpus", 2}})
	path := filepath.Join(t.TempDir(), "inits")

	counters, err := actorrt.Init1((*Counter).Init).Spawn(ctx, procs, "typed-counters", 5)
	if err != nil {
		t.Fatal(err)
	}
	if v, err := actorrt.Method((*Counter).GetValue).Call(counters).Get(ctx); err != nil || fmt.Sprint(v.Values()) != "[5 5]" {
		t.Fatalf("typed counters: %v, %v; want [5 5]", v, err)
	}

	m, err := markerInit.Spawn(ctx, procs, "typed-markers", path, 1, "a")
	if err != nil {
		t.Fatal(err)
	}
	if w, err := weight.Call(m).Get(ctx); err != nil || fmt.Sprint(w.Values()) != "[1 1]" {
		t.Fatalf("weights: %v, %v; want [1 1]", w, err)
	}
	if _, err := markerInit.SpawnWith(ctx, procs, "typed-markers-per-proc", actorrt.SpawnOptions{PerProc: actorrt.Dims{{"per", 2}}}, path, 2.5, "b"); err != nil {
		t.Fatal(err)
	}
	one, err := markerInit.GetOrSpawn(ctx, "typed-marker-singleton", path, 3, "c")
	if err != nil {
		t.Fatal(err)
	}
	if w, err := weight.CallOne(one).Get(ctx); err != nil || w != 3 {
		t.Fatalf("singleton weight: %v, %v; want 3", w, err)
	}
	got := strings.Join(lines(t, path), ", ")
	if want := "a 1, a 1, b 2.5, b 2.5, b 2.5, b 2.5, c 3"; got != want {
		t.Fatalf("Init ran as %q, want %q", got, want)
	}

	before := len(lines(t, path))
	for _, tt := range []struct {
		name string
		s    actorrt.Spawner3[Marker, string, float64, Tag]
		want string
	}{
		{"another method", actorrt.Init3((*Marker).Note), "(*Marker).Note is not the Init of"},
		{"zero Spawner", actorrt.Spawner3[Marker, string, float64, Tag]{}, "the zero Spawner"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tt.s.Spawn(ctx, procs, "typed-refused", path, 1, "x")
			wantErr(t, "Spawn", err, actorrt.ErrBadEndpoint, tt.want, "Spawn[Marker]")
			_, err = tt.s.SpawnWith(ctx, procs, "typed-refused", actorrt.SpawnOptions{}, path, 1, "x")
			wantErr(t, "SpawnWith", err, actorrt.ErrBadEndpoint, tt.want)
			_, err = tt.s.GetOrSpawn(ctx, "typed-refused", path, 1, "x")
			wantErr(t, "GetOrSpawn", err, actorrt.ErrBadEndpoint, tt.want, "GetOrSpawn[Marker]")
		})
	}
	if n := len(lines(t, path)); n != before {
		t.Fatalf("a refused spawn ran %d Inits (or Notes)", n-before)
	}
}

// TestUntypedSpawnCheckedAtCall: Spawn, SpawnWith, SpawnPerProc and
// GetOrSpawn with ...any compare the arguments' types with Init's
// parameters in the caller and refuse a mismatch, naming the parameter
// and both types, before any proc runs Init: an int for a float64, which
// msgpack would carry, is refused there too.
func TestUntypedSpawnCheckedAtCall(t *testing.T) {
	inProcess(t)
	ctx := testCtx(t)
	procs := spawnProcs(t, actorrt.Dims{{"gpus", 2}})
	path := filepath.Join(t.TempDir(), "inits")
	const sig = "Marker.Init(*Context, string, float64, actorrt_test.Tag)"
	tests := []struct {
		name string
		args []any
		want []string
	}{
		{"int for float64", []any{path, 1, Tag("a")},
			[]string{"parameter 2 of " + sig + " is float64, given int", "actorrt.Init3((*Marker).Init)"}},
		{"string for a named string type", []any{path, 1.0, "a"},
			[]string{"parameter 3 of " + sig + " is actorrt_test.Tag, given string"}},
		{"nil for string", []any{nil, 1.0, Tag("a")},
			[]string{"parameter 1 of " + sig + " is string, given nil"}},
		{"too few", []any{path, 1.0},
			[]string{sig + " takes 3 arguments, given 2 arguments (string, float64)"}},
		{"too many", []any{path, 1.0, Tag("a"), 4},
			[]string{sig + " takes 3 arguments, given 4 arguments (string, float64, actorrt_test.Tag, int)"}},
		{"none", nil,
			[]string{sig + " takes 3 arguments, given none"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := actorrt.Spawn[Marker](ctx, procs, "untyped", tt.args...)
			wantErr(t, "Spawn", err, actorrt.ErrBadArgs, append(tt.want, `Spawn[Marker] "untyped"`)...)
			_, err = actorrt.SpawnWith[Marker](ctx, procs, "untyped", actorrt.SpawnOptions{}, tt.args...)
			wantErr(t, "SpawnWith", err, actorrt.ErrBadArgs, tt.want...)
			_, err = actorrt.SpawnPerProc[Marker](ctx, procs, "untyped", actorrt.Dims{{"per", 2}}, tt.args...)
			wantErr(t, "SpawnPerProc", err, actorrt.ErrBadArgs, tt.want...)
			_, err = actorrt.GetOrSpawn[Marker](ctx, "untyped", tt.args...)
			wantErr(t, "GetOrSpawn", err, actorrt.ErrBadArgs, append(tt.want, `GetOrSpawn[Marker] "untyped"`)...)
		})
	}
	t.Run("type without Init", func(t *testing.T) {
		_, err := actorrt.Spawn[Echo](ctx, procs, "untyped", 1)
		wantErr(t, "Spawn", err, actorrt.ErrBadArgs, "given 1 argument (int), but Echo has no Init method")
	})
	if got := lines(t, path); len(got) != 0 {
		t.Fatalf("a refused spawn ran Init: %q", got)
	}
	// The right arguments, untyped, spawn: the check refuses only what is
	// wrong.
	if _, err := actorrt.Spawn[Marker](ctx, procs, "untyped", path, 1.0, Tag("a")); err != nil {
		t.Fatal(err)
	}
	if got := lines(t, path); len(got) != 2 {
		t.Fatalf("Init ran as %q, want twice", got)
	}
}

// TestTypedSpawnCompileErrors runs the compiler on small programs: the
// typed spawns of the right arguments build, and each wrong one fails
// with the message the compiler gives. The program is laid over the
// module (go build -overlay), so nothing is written in the tree.
func TestTypedSpawnCompileErrors(t *testing.T) {
	gocmd, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command:", err)
	}
	const header = `package main

import (
	"context"

	"github.com/monarch-go/monarch/actorrt"
)

type Tag string

type Marker struct{}

func (m *Marker) Init(ctx *actorrt.Context, path string, weight float64, tag Tag) error { return nil }

type Counter struct{}

func (c *Counter) Init(ctx *actorrt.Context, initial int) error { return nil }

func main() {
	ctx := context.Background()
	var procs *actorrt.ProcMesh
	_, _ = ctx, procs
`
	build := func(t *testing.T, body string) (string, error) {
		t.Helper()
		dir := t.TempDir()
		src := filepath.Join(dir, "main.go")
		if err := os.WriteFile(src, []byte(header+body+"\n}\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		wd, err := os.Getwd()
		if err != nil {
			t.Fatal(err)
		}
		pkg := filepath.Join(wd, "testdata", "typedspawn")
		overlay, err := json.Marshal(map[string]any{"Replace": map[string]string{filepath.Join(pkg, "main.go"): src}})
		if err != nil {
			t.Fatal(err)
		}
		ov := filepath.Join(dir, "overlay.json")
		if err := os.WriteFile(ov, overlay, 0o600); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(gocmd, "build", "-overlay", ov, "-o", os.DevNull, "./testdata/typedspawn")
		out, err := cmd.CombinedOutput()
		return string(out), err
	}

	t.Run("right arguments", func(t *testing.T) {
		out, err := build(t, `
	actorrt.Init1((*Counter).Init).Spawn(ctx, procs, "c", 0)
	actorrt.Init1((*Counter).Init).SpawnWith(ctx, procs, "c", actorrt.SpawnOptions{}, 0)
	actorrt.Init1((*Counter).Init).GetOrSpawn(ctx, "c", 0)
	actorrt.Init3((*Marker).Init).Spawn(ctx, procs, "m", "path", 1, "tag") // constants take Init's types
	var tag Tag = "t"
	actorrt.Init3((*Marker).Init).GetOrSpawn(ctx, "m", "path", 2.5, tag)
	actorrt.Spawn[Counter](ctx, procs, "c", "zero") // untyped: checked when it runs`)
		if err != nil {
			t.Fatalf("go build: %v\n%s", err, out)
		}
	})
	for _, tt := range []struct {
		name, call, want string
	}{
		{"wrong type", `actorrt.Init1((*Counter).Init).Spawn(ctx, procs, "c", "zero")`,
			`cannot use "zero" (untyped string constant) as int value in argument to actorrt.Init1((*Counter).Init).Spawn`},
		{"wrong type, typed value", `s := "zero"; actorrt.Init1((*Counter).Init).SpawnWith(ctx, procs, "c", actorrt.SpawnOptions{}, s)`,
			`cannot use s (variable of type string) as int value in argument to actorrt.Init1((*Counter).Init).SpawnWith`},
		{"a float for an int", `actorrt.Init1((*Counter).Init).GetOrSpawn(ctx, "c", 1.5)`,
			`cannot use 1.5 (untyped float constant) as int value in argument to actorrt.Init1((*Counter).Init).GetOrSpawn`},
		{"string for a named type", `s := "t"; actorrt.Init3((*Marker).Init).Spawn(ctx, procs, "m", "path", 1, s)`,
			`cannot use s (variable of type string) as Tag value in argument to actorrt.Init3((*Marker).Init).Spawn`},
		{"too many", `actorrt.Init1((*Counter).Init).Spawn(ctx, procs, "c", 1, 2)`,
			`too many arguments in call to actorrt.Init1((*Counter).Init).Spawn`},
		{"too few", `actorrt.Init3((*Marker).Init).Spawn(ctx, procs, "m", "path", 1)`,
			`not enough arguments in call to actorrt.Init3((*Marker).Init).Spawn`},
		{"binder of another arity", `actorrt.Init2((*Counter).Init)`,
			`in call to actorrt.Init2, type func(c *Counter, ctx *actorrt.Context, initial int) error of (*Counter).Init does not match func(*A, *actorrt.Context, T1, T2) error`},
		{"mesh of another type", `var m *actorrt.ActorMesh[Marker]; m, _ = actorrt.Init1((*Counter).Init).Spawn(ctx, procs, "c", 0); _ = m`,
			`cannot use actorrt.Init1((*Counter).Init).Spawn(ctx, procs, "c", 0) (value of type *actorrt.ActorMesh[Counter]) as *actorrt.ActorMesh[Marker] value in assignment`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			out, err := build(t, "\t"+tt.call)
			if err == nil {
				t.Fatalf("%s built; want the compiler to refuse it", tt.call)
			}
			if !strings.Contains(out, tt.want) {
				t.Fatalf("go build of %s:\n%s\nwant a message with %q", tt.call, out, tt.want)
			}
		})
	}
}
