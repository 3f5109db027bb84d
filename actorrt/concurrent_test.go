package actorrt_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/monarch-go/monarch/actorrt"
)

func init() {
	mustRegister(actorrt.Register[Pool](
		actorrt.ConcurrentLimit((*Pool).Work, 3),
		actorrt.ConcurrentLimit((*Pool).Serial, 1),
		actorrt.Concurrent((*Pool).Crash),
	))
	mustRegister(actorrt.Register[PoolWatch]())
	mustRegister(actorrt.Register[Twin](actorrt.Concurrent((*Twin).PingConcurrent)))
}

// Pool has concurrent endpoints (Work: 3 at once, Serial: 1, Crash: the
// default) beside ordinary ones. Its calls note what they see in lanes
// kept per proc, which PoolWatch, another actor of the same proc, reads
// and opens: Pool's own mailbox waits while a bound is reached.
type Pool struct{ lanes *poolLanes }

// poolLanes is what one Pool mesh's calls noted in this proc.
type poolLanes struct {
	mu    sync.Mutex
	notes int // Note calls handled
	lanes map[string]*lane
}

// lane is one concurrent endpoint's record.
type lane struct {
	LaneState
	gate chan struct{} // a token lets one call return
}

// LaneState is what a lane's calls noted: how many run now, at most,
// which started in which order, and how many Notes each saw at its start.
type LaneState struct {
	Running, Peak int
	Started       []int
	NotesSeen     []int
}

var poolsByMesh sync.Map // mesh name -> *poolLanes

func lanesOf(mesh string) *poolLanes {
	v, _ := poolsByMesh.LoadOrStore(mesh, &poolLanes{lanes: map[string]*lane{}})
	return v.(*poolLanes)
}

func (p *poolLanes) lane(name string) *lane {
	p.mu.Lock()
	defer p.mu.Unlock()
	l := p.lanes[name]
	if l == nil {
		l = &lane{gate: make(chan struct{}, 1000)}
		p.lanes[name] = l
	}
	return l
}

func (p *Pool) Init(ctx *actorrt.Context) error {
	p.lanes = lanesOf(ctx.ActorInstance().MeshName())
	return nil
}

// Work and Serial note their start and wait for a token of their lane.
func (p *Pool) Work(ctx *actorrt.Context, seq int) (int, error)   { return p.enter(ctx, "work", seq) }
func (p *Pool) Serial(ctx *actorrt.Context, seq int) (int, error) { return p.enter(ctx, "serial", seq) }

func (p *Pool) enter(ctx *actorrt.Context, name string, seq int) (int, error) {
	l := p.lanes.lane(name)
	p.lanes.mu.Lock()
	l.Running++
	l.Peak = max(l.Peak, l.Running)
	l.Started = append(l.Started, seq)
	l.NotesSeen = append(l.NotesSeen, p.lanes.notes)
	p.lanes.mu.Unlock()
	defer func() {
		p.lanes.mu.Lock()
		l.Running--
		p.lanes.mu.Unlock()
	}()
	select {
	case <-l.gate:
		return seq, nil
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

// Note is ordinary: it counts.
func (p *Pool) Note(ctx *actorrt.Context) error {
	p.lanes.mu.Lock()
	p.lanes.notes++
	p.lanes.mu.Unlock()
	return nil
}

// Status is ordinary: how many Work calls run.
func (p *Pool) Status(ctx *actorrt.Context) (int, error) {
	l := p.lanes.lane("work")
	p.lanes.mu.Lock()
	defer p.lanes.mu.Unlock()
	return l.Running, nil
}

// Crash is concurrent: it panics or fails.
func (p *Pool) Crash(ctx *actorrt.Context, how string) error {
	if how == "panic" {
		panic("concurrent boom")
	}
	return errors.New(how)
}

// Spin is ordinary and starts a goroutine through ctx.Go, which panics,
// fails or returns nil.
func (p *Pool) Spin(ctx *actorrt.Context, how string) error {
	ctx.Go(func(ctx *actorrt.Context) error {
		switch how {
		case "panic":
			panic("goroutine boom")
		case "ok":
			return nil
		}
		return errors.New(how)
	})
	return nil
}

// Later answers on its port from a goroutine started with ctx.Go, or
// panics there.
func (p *Pool) Later(ctx *actorrt.Context, port actorrt.Port[int], how string) error {
	ctx.Go(func(ctx *actorrt.Context) error {
		if how == "panic" {
			panic("answer boom")
		}
		return port.Send(7)
	})
	return nil
}

// PoolWatch reads and opens a Pool's lanes in its proc.
type PoolWatch struct{}

func (w *PoolWatch) Lane(ctx *actorrt.Context, mesh, name string) (LaneState, error) {
	p := lanesOf(mesh)
	l := p.lane(name)
	p.mu.Lock()
	defer p.mu.Unlock()
	s := l.LaneState
	s.Started, s.NotesSeen = slices.Clone(s.Started), slices.Clone(s.NotesSeen)
	return s, nil
}

func (w *PoolWatch) Release(ctx *actorrt.Context, mesh, name string, n int) error {
	l := lanesOf(mesh).lane(name)
	for i := 0; i < n; i++ {
		l.gate <- struct{}{}
	}
	return nil
}

// poolFixture is a Pool and its watcher on a proc of their own.
type poolFixture struct {
	t     *testing.T
	name  string
	pool  *actorrt.ActorMesh[Pool]
	watch *actorrt.ActorMesh[PoolWatch]
}

func newPool(t *testing.T, name string) *poolFixture {
	return newPoolOn(t, spawnProcs(t, actorrt.Dims{{"gpus", 1}}), name)
}

func newPoolOn(t *testing.T, procs *actorrt.ProcMesh, name string) *poolFixture {
	return &poolFixture{t: t, name: name, pool: spawn[Pool](t, procs, name), watch: spawn[PoolWatch](t, procs, name+"-watch")}
}

func (f *poolFixture) lane(name string) LaneState {
	f.t.Helper()
	s, err := actorrt.Method2((*PoolWatch).Lane).CallOne(f.watch, f.name, name).Get(testCtx(f.t))
	if err != nil {
		f.t.Fatal(err)
	}
	return s
}

// waitStarted waits until n calls of the lane started.
func (f *poolFixture) waitStarted(name string, n int) LaneState {
	f.t.Helper()
	var s LaneState
	waitFor(f.t, fmt.Sprintf("%d %s calls to start", n, name), func() bool { s = f.lane(name); return len(s.Started) >= n })
	return s
}

func (f *poolFixture) release(name string, n int) {
	f.t.Helper()
	if _, err := actorrt.VoidMethod3((*PoolWatch).Release).CallOne(f.watch, f.name, name, n).Get(testCtx(f.t)); err != nil {
		f.t.Fatal(err)
	}
}

// TestConcurrentEndpointLeavesOrdinaryOnesFree: while a concurrent call
// waits, the actor's ordinary endpoint answers; the call then completes.
func TestConcurrentEndpointLeavesOrdinaryOnesFree(t *testing.T) {
	inProcess(t)
	ctx := testCtx(t)
	f := newPool(t, "pool-free")
	work := actorrt.Method1((*Pool).Work).CallOne(f.pool, 1)
	waitFor(t, "Status to see the running Work call", func() bool {
		n, err := actorrt.Method((*Pool).Status).CallOne(f.pool).Get(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return n == 1
	})
	select {
	case <-work.Done():
		t.Fatal("Work returned before it was let go")
	default:
	}
	f.release("work", 1)
	if v, err := work.Get(ctx); err != nil || v != 1 {
		t.Fatalf("Work = %d, %v", v, err)
	}
}

// TestConcurrentBound: at most the bound of calls run at once; once it is
// reached, later calls start one by one as earlier ones end, in the order
// they were sent; a bound of 1 runs the calls one after another, in order.
func TestConcurrentBound(t *testing.T) {
	inProcess(t)
	ctx := testCtx(t)
	f := newPool(t, "pool-bound")
	for _, tt := range []struct {
		lane  string
		bound int
		work  func(seq int) *actorrt.Future[int]
	}{
		{"work", 3, func(seq int) *actorrt.Future[int] { return actorrt.Method1((*Pool).Work).CallOne(f.pool, seq) }},
		{"serial", 1, func(seq int) *actorrt.Future[int] { return actorrt.Method1((*Pool).Serial).CallOne(f.pool, seq) }},
	} {
		t.Run(tt.lane, func(t *testing.T) {
			const calls = 7
			var futs []*actorrt.Future[int]
			for seq := 1; seq <= calls; seq++ {
				futs = append(futs, tt.work(seq))
			}
			s := f.waitStarted(tt.lane, tt.bound)
			// One call ends at a time, and the next starts: each start is
			// seen before the next call may start.
			for n := tt.bound + 1; n <= calls; n++ {
				f.release(tt.lane, 1)
				s = f.waitStarted(tt.lane, n)
			}
			f.release(tt.lane, tt.bound)
			for i, fut := range futs {
				if v, err := fut.Get(ctx); err != nil || v != i+1 {
					t.Fatalf("call %d = %d, %v", i+1, v, err)
				}
			}
			var first, rest []int
			for seq := 1; seq <= calls; seq++ {
				if seq <= tt.bound {
					first = append(first, seq)
				} else {
					rest = append(rest, seq)
				}
			}
			if s.Peak != tt.bound || len(s.Started) != calls ||
				!slices.Equal(slices.Sorted(slices.Values(s.Started[:tt.bound])), first) || !slices.Equal(s.Started[tt.bound:], rest) {
				t.Fatalf("bound %d: %+v", tt.bound, s)
			}
		})
	}
}

// TestConcurrentAfterOrdinary: a concurrent call starts after every
// message sent before it was handled, and ordinary messages sent after it
// run while it waits.
func TestConcurrentAfterOrdinary(t *testing.T) {
	inProcess(t)
	ctx := testCtx(t)
	f := newPool(t, "pool-order")
	note := func() {
		if err := actorrt.VoidMethod((*Pool).Note).Broadcast(f.pool); err != nil {
			t.Fatal(err)
		}
	}
	notesBefore := map[int]int{} // Work's seq -> Notes sent before it
	var futs []*actorrt.Future[int]
	sent := 0
	for i, notes := range []int{1, 2, 0} { // Notes sent before each of three Works
		for range notes {
			note()
			sent++
		}
		notesBefore[i+1] = sent
		futs = append(futs, actorrt.Method1((*Pool).Work).CallOne(f.pool, i+1))
	}
	for range 2 {
		note()
		sent++
	}
	s := f.waitStarted("work", 3)
	for i, seq := range s.Started {
		if s.NotesSeen[i] < notesBefore[seq] {
			t.Fatalf("Work %d started having seen %d Notes; %d were sent before it (%+v)", seq, s.NotesSeen[i], notesBefore[seq], s)
		}
	}
	// Every Note ran while the Works wait: Status, sent after them all,
	// answers with the three still running.
	if n, err := actorrt.Method((*Pool).Status).CallOne(f.pool).Get(ctx); err != nil || n != 3 {
		t.Fatalf("Status = %d, %v", n, err)
	}
	f.release("work", 3)
	for _, fut := range futs {
		if _, err := fut.Get(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// TestConcurrentEndpointErrors: a concurrent endpoint's error or panic
// reaches its caller as an *ActorError and the actor lives on; one nobody
// receives fails the actor, whose owner hears of it, and the proc lives.
func TestConcurrentEndpointErrors(t *testing.T) {
	inProcess(t)
	ctx := testCtx(t)
	f := newPool(t, "pool-errors")
	crash := actorrt.VoidMethod1((*Pool).Crash)
	_, err := crash.CallOne(f.pool, "panic").Get(ctx)
	var ae *actorrt.ActorError
	if !errors.Is(err, actorrt.ErrPanic) || !errors.As(err, &ae) || ae.Endpoint != "Crash" || !strings.Contains(ae.Stack, "Crash") {
		t.Fatalf("panic: %v", err)
	}
	if _, err := crash.CallOne(f.pool, "no thanks").Get(ctx); !errors.As(err, &ae) || ae.Message != "no thanks" {
		t.Fatalf("error: %v", err)
	}
	if _, err := actorrt.Method((*Pool).Status).CallOne(f.pool).Get(ctx); err != nil {
		t.Fatalf("Status after the errors: %v", err)
	}
	if err := crash.Broadcast(f.pool, "unheard"); err != nil {
		t.Fatal(err)
	}
	if fl := waitFailure(t, "pool-errors"); fl.Err == nil || fl.Err.Endpoint != "Crash" || !strings.Contains(fl.Reason, "unheard") {
		t.Fatalf("failure %+v", fl)
	}
	if _, err := actorrt.Method((*Pool).Status).CallOne(f.pool).Get(ctx); !errors.Is(err, actorrt.ErrActorFailed) {
		t.Fatalf("Status of the failed actor: %v", err)
	}
	f.lane("work") // the proc lives
}

// TestContextGo: a goroutine started with ctx.Go that panics or fails
// fails its actor, whose owner hears of it with the stack; an answer it
// owes a caller on a Port is that error. The proc lives.
func TestContextGo(t *testing.T) {
	inProcess(t)
	ctx := testCtx(t)
	procs := spawnProcs(t, actorrt.Dims{{"gpus", 1}})
	later := actorrt.PortMethod1((*Pool).Later)
	spin := actorrt.VoidMethod1((*Pool).Spin)

	t.Run("answers", func(t *testing.T) {
		f := newPoolOn(t, procs, "go-ok")
		if _, err := spin.CallOne(f.pool, "ok").Get(ctx); err != nil {
			t.Fatal(err)
		}
		if v, err := later.CallOne(f.pool, "ok").Get(ctx); err != nil || v != 7 {
			t.Fatalf("Later = %d, %v", v, err)
		}
		if _, err := actorrt.Method((*Pool).Status).CallOne(f.pool).Get(ctx); err != nil {
			t.Fatal(err)
		}
	})
	for _, tt := range []struct {
		name, how, mention string
		port               bool
	}{
		{"panic", "panic", "goroutine boom", false},
		{"error", "gave up", "gave up", false},
		{"panic owing a port", "panic", "answer boom", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			mesh := "go-" + strings.ReplaceAll(tt.name, " ", "-")
			f := newPoolOn(t, procs, mesh)
			endpoint := "Spin (ctx.Go)"
			if tt.port {
				endpoint = "Later (ctx.Go)"
				_, err := later.CallOne(f.pool, tt.how).Get(ctx)
				var ae *actorrt.ActorError
				if !errors.Is(err, actorrt.ErrPanic) || !errors.As(err, &ae) || ae.Endpoint != endpoint || !strings.Contains(ae.Stack, "Later") {
					t.Fatalf("the caller got %v", err)
				}
			} else if _, err := spin.CallOne(f.pool, tt.how).Get(ctx); err != nil {
				t.Fatal(err) // the endpoint itself returned nil
			}
			fl := waitFailure(t, mesh)
			if fl.Err == nil || fl.Err.Endpoint != endpoint || !strings.Contains(fl.Reason, tt.mention) ||
				(tt.how == "panic") != (fl.Err.Stack != "") {
				t.Fatalf("failure %+v (%+v)", fl, fl.Err)
			}
			if _, err := actorrt.Method((*Pool).Status).CallOne(f.pool).Get(ctx); !errors.Is(err, actorrt.ErrActorFailed) {
				t.Fatalf("Status of the failed actor: %v", err)
			}
			f.lane("work") // the proc lives
		})
	}
}

// ConcBad is registered with bad options only.
type ConcBad struct{}

func (c *ConcBad) Work(ctx *actorrt.Context) error { return nil }
func (c *ConcBad) Plain() int                      { return 1 }

// TestRegisterRefusesBadConcurrent: a bad option fails Register, saying
// which and why, and the type stays unregistered.
func TestRegisterRefusesBadConcurrent(t *testing.T) {
	inProcess(t)
	for _, tt := range []struct {
		name    string
		opts    []actorrt.RegisterOption
		mention string
	}{
		{"zero bound", []actorrt.RegisterOption{actorrt.ConcurrentLimit((*ConcBad).Work, 0)}, "Concurrent Work: bound 0"},
		{"negative bound", []actorrt.RegisterOption{actorrt.ConcurrentLimit((*ConcBad).Work, -2)}, "bound -2"},
		{"not an endpoint", []actorrt.RegisterOption{actorrt.Concurrent((*ConcBad).Plain)}, "Plain is not an endpoint"},
		{"another type's endpoint", []actorrt.RegisterOption{actorrt.Concurrent((*Pool).Work)}, "not a method expression of"},
		{"a name", []actorrt.RegisterOption{actorrt.Concurrent("Work")}, "not a string"},
		{"nil", []actorrt.RegisterOption{actorrt.Concurrent(nil)}, "nil endpoint"},
		{"twice", []actorrt.RegisterOption{actorrt.Concurrent((*ConcBad).Work), actorrt.ConcurrentLimit((*ConcBad).Work, 2)}, "Work: given twice"},
		{"zero option", []actorrt.RegisterOption{{}}, "zero RegisterOption"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := actorrt.Register[ConcBad](tt.opts...)
			if !errors.Is(err, actorrt.ErrBadEndpoint) || !strings.Contains(err.Error(), tt.mention) {
				t.Fatalf("err = %v, want one that mentions %q", err, tt.mention)
			}
		})
	}
	_, err := actorrt.Spawn[ConcBad](testCtx(t), actorrt.ThisProc(rootCtx(t)), "conc-bad")
	if !errors.Is(err, actorrt.ErrNotRegistered) || !strings.Contains(err.Error(), "Register failed") {
		t.Fatalf("Spawn: %v", err)
	}
}

// Twin has the same endpoint twice: ordinary and concurrent.
type Twin struct{}

func (t *Twin) Ping(ctx *actorrt.Context) (int, error)           { return 1, nil }
func (t *Twin) PingConcurrent(ctx *actorrt.Context) (int, error) { return 1, nil }

// BenchmarkW1Concurrent: CallOne round trip to a concurrent endpoint of
// an actor in another proc, beside the same call to an ordinary endpoint
// of that actor (W1's); p50 latency in µs. The difference is the call's
// goroutine and Context.
func BenchmarkW1Concurrent(b *testing.B) {
	ctx := clientCtx
	twin := spawnRemote[Twin](b, "w1-concurrent")
	ours := func() error { _, err := actorrt.Method((*Twin).PingConcurrent).CallOne(twin).Get(ctx); return err }
	floor := func() error { _, err := actorrt.Method((*Twin).Ping).CallOne(twin).Get(ctx); return err }
	latencies(b, 500, ours) // warm up both paths
	latencies(b, 500, floor)
	var o, f []float64
	b.ResetTimer()
	for r := 0; r < benchRounds; r++ {
		o = append(o, latencies(b, 2000, ours)...)
		f = append(f, latencies(b, 2000, floor)...)
	}
	report(b, "W1-concurrent-vs-ordinary-p50-us", o, f, "us", "<=", 1.2)
}
