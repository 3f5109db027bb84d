package actorrt_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/monarch-go/monarch/actorrt"
)

// Endpoints of six arguments, and remote functions of three: the largest
// the generated binders take (issue 24, item 7).

func init() { mustRegister(actorrt.Register[Wide]()) }

// mustRegister ends the test binary, and so its procs, if a test actor
// type registered in an init failed to.
func mustRegister(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
}

// Wide takes six arguments of six kinds in every endpoint shape.
type Wide struct{ kept string }

// WidePair is a struct argument.
type WidePair struct {
	Name string
	N    int
}

func wideString(rank int, a int, b string, c []byte, d float64, e WidePair, f map[string]int) string {
	return fmt.Sprintf("%d|%d|%s|%x|%g|%s:%d|%v", rank, a, b, c, d, e.Name, e.N, f)
}

func (w *Wide) Six(ctx *actorrt.Context, a int, b string, c []byte, d float64, e WidePair, f map[string]int) (string, error) {
	if a < 0 {
		return "", fmt.Errorf("six: a=%d", a)
	}
	return wideString(ctx.ActorInstance().Rank().Rank(), a, b, c, d, e, f), nil
}

func (w *Wide) Keep(ctx *actorrt.Context, a int, b string, c []byte, d float64, e WidePair, f map[string]int) error {
	w.kept = wideString(ctx.ActorInstance().Rank().Rank(), a, b, c, d, e, f)
	return nil
}

func (w *Wide) Kept(ctx *actorrt.Context) (string, error) { return w.kept, nil }

func (w *Wide) Answer(ctx *actorrt.Context, port actorrt.Port[string], a int, b string, c []byte, d float64, e WidePair, f map[string]int) error {
	return port.Send(wideString(ctx.ActorInstance().Rank().Rank(), a, b, c, d, e, f))
}

// WideBad's sixth parameter cannot travel intact: Register refuses it.
type WideBad struct{}

type wideHidden struct{ n int }

func (w *WideBad) Six(ctx *actorrt.Context, a, b, c, d, e int, f wideHidden) error { return nil }

var (
	wideSix    = actorrt.Method6((*Wide).Six)
	wideKeep   = actorrt.VoidMethod6((*Wide).Keep)
	wideAnswer = actorrt.PortMethod6((*Wide).Answer)
)

func TestSixArguments(t *testing.T) {
	inProcess(t)
	ctx := testCtx(t)
	procs := spawnProcs(t, actorrt.Dims{{"gpus", 3}})
	w := spawn[Wide](t, procs, "wide")
	blob := []byte{0, 1, 0xfe, 0xff}
	pair := WidePair{"p", -7}
	m := map[string]int{"x": 1, "y": 2}
	want := func(rank, a int) string { return wideString(rank, a, "six", blob, 2.5, pair, m) }

	// Call: every member, by rank.
	all, err := wideSix.Call(w, 1, "six", blob, 2.5, pair, m).Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := all.Values(); !reflect.DeepEqual(got, []string{want(0, 1), want(1, 1), want(2, 1)}) {
		t.Fatalf("Call = %q", got)
	}
	// CallOne: one member of a slice.
	one, err := wideSix.CallOne(w.At("gpus", 2), 2, "six", blob, 2.5, pair, m).Get(ctx)
	if err != nil || one != want(2, 2) {
		t.Fatalf("CallOne = %q, %v; want %q", one, err, want(2, 2))
	}
	// An endpoint's error comes back as with fewer arguments.
	var ae *actorrt.ActorError
	if _, err := wideSix.CallOne(w.At("gpus", 0), -1, "six", blob, 2.5, pair, m).Get(ctx); !errors.As(err, &ae) || ae.Message != "six: a=-1" {
		t.Fatalf("CallOne of a failing call: %v", err)
	}
	// Broadcast to a slice, then read what each member kept: in order
	// from this sender, so the Call sees the Broadcast's effect.
	if err := wideKeep.Broadcast(w.Slice("gpus", 1, 3), 3, "six", blob, 2.5, pair, m); err != nil {
		t.Fatal(err)
	}
	kept, err := actorrt.Method((*Wide).Kept).Call(w).Get(ctx)
	if err != nil || !reflect.DeepEqual(kept.Values(), []string{"", want(1, 3), want(2, 3)}) {
		t.Fatalf("after Broadcast, kept %q, %v", kept.Values(), err)
	}
	// Stream, Choose and Send, and an explicit-response endpoint.
	var streamed []string
	for v, err := range wideSix.Stream(w, 4, "six", blob, 2.5, pair, m).All(ctx) {
		if err != nil {
			t.Fatal(err)
		}
		streamed = append(streamed, v)
	}
	slices.Sort(streamed)
	if !reflect.DeepEqual(streamed, []string{want(0, 4), want(1, 4), want(2, 4)}) {
		t.Fatalf("Stream = %q", streamed)
	}
	if v, err := wideSix.Choose(w, 5, "six", blob, 2.5, pair, m).Get(ctx); err != nil || !slices.Contains([]string{want(0, 5), want(1, 5), want(2, 5)}, v) {
		t.Fatalf("Choose = %q, %v", v, err)
	}
	port, recv := actorrt.OpenChannel[string](ctx)
	defer recv.Close()
	if err := wideSix.Send(w.At("gpus", 1), port, 6, "six", blob, 2.5, pair, m); err != nil {
		t.Fatal(err)
	}
	if v, err := recv.Recv().Get(ctx); err != nil || v != want(1, 6) {
		t.Fatalf("Send delivered %q, %v", v, err)
	}
	if v, err := wideAnswer.CallOne(w.At("gpus", 0), 7, "six", blob, 2.5, pair, m).Get(ctx); err != nil || v != want(0, 7) {
		t.Fatalf("PortMethod6 answered %q, %v", v, err)
	}

	// A sixth parameter that would not arrive as sent is refused at
	// Register, named by its place.
	err = actorrt.Register[WideBad]()
	if !errors.Is(err, actorrt.ErrBadEndpoint) || !strings.Contains(err.Error(), "WideBad.Six, parameter 6 (actorrt_test.wideHidden)") {
		t.Fatalf("Register[WideBad]: %v", err)
	}
}

// joinRuns counts the runs of test_join3 in this process.
var joinRuns atomic.Int64

var join3 = actorrt.Remote3("test_join3", func(ctx context.Context, prefix string, n int, xs []float64) (string, error) {
	runs := joinRuns.Add(1)
	if n < 0 {
		return "", fmt.Errorf("join3: negative %d", n)
	}
	return fmt.Sprintf("%s-%d-%v-run%d", prefix, n, xs, runs), nil
})

func TestRemoteThreeArguments(t *testing.T) {
	// Real procs: each counts its own runs.
	ctx := testCtx(t)
	procs := spawnProcs(t, actorrt.Dims{{"hosts", 2}, {"gpus", 2}})
	got, err := join3.Call(procs, "a", 3, []float64{0.5, 2}).Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range got.Values() {
		if v != "a-3-[0.5 2]-run1" {
			t.Fatalf("Call = %v", got)
		}
	}
	if _, err := join3.Call(procs.Slice("gpus", 0, 1), "a", -1, nil).Get(ctx); err == nil || !strings.Contains(err.Error(), "join3: negative -1") {
		t.Fatalf("failing remote: %v", err)
	}
	port, recv := actorrt.OpenChannel[string](ctx)
	defer recv.Close()
	if err := join3.Send(procs.Slice("gpus", 1, 2), port, "s", 1, nil); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		// Its second run on gpus=1 (gpus=0 ran the failing call).
		if v, err := recv.Recv().Get(ctx); err != nil || v != "s-1-[]-run2" {
			t.Fatalf("Send delivered %q, %v", v, err)
		}
	}
	// Broadcast runs it once more on every proc, before a later call from
	// this sender.
	if err := join3.Broadcast(procs, "b", 0, []float64{1}); err != nil {
		t.Fatal(err)
	}
	after, err := join3.Call(procs, "c", 0, nil).Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"c-0-[]-run4", "c-0-[]-run4", "c-0-[]-run4", "c-0-[]-run4"}; !reflect.DeepEqual(after.Values(), want) {
		t.Fatalf("after Broadcast: %q, want %q", after.Values(), want)
	}

	// An argument that cannot travel intact is refused at registration:
	// every use fails, naming it.
	bad := actorrt.Remote3("test_bad3", func(ctx context.Context, a int, b string, c chan int) (int, error) { return 0, nil })
	if _, err := bad.Call(procs, 1, "x", nil).Get(ctx); !errors.Is(err, actorrt.ErrBadEndpoint) || !strings.Contains(err.Error(), `remote function "test_bad3": argument 3 (chan int)`) {
		t.Fatalf("Remote3 with a channel argument: %v", err)
	}
	if err := bad.Broadcast(procs, 1, "x", nil); !errors.Is(err, actorrt.ErrBadEndpoint) {
		t.Fatalf("Broadcast of a refused remote: %v", err)
	}
}
