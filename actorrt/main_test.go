package actorrt_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/monarch-go/monarch/actorrt"
	"github.com/monarch-go/monarch/actorrt/actortest"
	"github.com/monarch-go/monarch/internal/testenv"
)

// The test binary is also the program its procs run: SpawnProcs re-executes
// it in worker mode, where actorrt.Run serves actors instead of running
// the tests. Helper programs used by some tests are selected with
// MONARCH_TEST_HELPER.
func TestMain(m *testing.M) {
	env := testenv.Setup() // first: procs and helpers inherit it
	registerTestActors()
	if name := os.Getenv("MONARCH_TEST_HELPER"); name != "" && !actorrt.IsProc() {
		os.Exit(runHelper(name))
	}
	if dir := os.Getenv("MONARCH_TEST_PROC_CPUPROFILE"); dir != "" && actorrt.IsProc() {
		// Profile the procs too when asked: benchmarks spend half their
		// time there.
		f, err := os.Create(filepath.Join(dir, fmt.Sprintf("proc-%d.prof", os.Getpid())))
		if err == nil {
			pprof.StartCPUProfile(f)
		}
	}
	// Tests that make actors fail read the failures from here; the default
	// hook (exit 1) is tested in a helper process. Cleanups that hang are
	// cut at 2s (cleanup_test.go), not the default 3s.
	code := 0
	opts := []actorrt.Option{actorrt.WithSpawnTimeout(60 * time.Second), actorrt.WithFaultHook(failures.record), actorrt.WithCleanupTimeout(2 * time.Second)}
	status := actorrt.Run(func(ctx context.Context) error {
		clientCtx = ctx
		// The tests whose subject is not the process run their procs in
		// this one (inProcess), on a cluster of the same options.
		c, err := actortest.New(1, opts...)
		if err != nil {
			return err
		}
		defer c.Close()
		inprocCtx = c.Context()
		code = m.Run()
		return nil
	}, opts...)
	pprof.StopCPUProfile()
	if status != 0 {
		code = status
	}
	os.Exit(env.Finish(code))
}

func registerTestActors() {
	for _, err := range []error{
		actorrt.Register[Counter](),
		actorrt.Register[Recorder](),
		actorrt.Register[Echo](),
		actorrt.Register[Numbers](),
		actorrt.Register[Keeper](),
		actorrt.Register[RLGen](),
		actorrt.Register[Gate](),
		actorrt.Register[Sleeper](),
		actorrt.Register[Hop](),
		actorrt.Register[Holder](),
		actorrt.Register[Slow](),
		actorrt.Register[DataLoader](),
		actorrt.Register[Trainer](),
		actorrt.Register[Whoami](),
		actorrt.Register[Crasher](),
		actorrt.Register[RefHolder](),
		actorrt.Register[Stall](),
		actorrt.Register[Supervisor](),
		actorrt.Register[Breaker](),
		actorrt.Register[Starter](),
		actorrt.Register[Printer](),
		actorrt.Register[Flooder](),
		actorrt.Register[Racer](),
		actorrt.Register[Bootstrapped](),
		actorrt.Register[Phoenix](),
		actorrt.Register[Lingerer](),
		actorrt.Register[PhoenixHolder](),
		actorrt.Register[PhoenixOwner](),
		actorrt.Register[SlotHolder](),
		actorrt.Register[Marker](),
	} {
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
	}
}

// clientCtx is the ctx Run gives the tests: it carries the client's
// runtime (ThisHost, Lookup, OpenChannel resolve it from their ctx). Nil
// in a proc, whose actors have their *Context.
var clientCtx context.Context

// inprocCtx is the client's ctx of an in-process cluster
// (actorrt/actortest): procs spawned from it are runtimes of the test
// process, not processes.
var inprocCtx context.Context

// inprocTests are the tests (by name) marked inProcess.
var inprocTests sync.Map

// inProcess marks t, and its subtests, as a test whose subject is not the
// process: its rootCtx is an in-process cluster's client, so the procs
// it spawns (spawnProcs, ThisHost(testCtx(t))) are runtimes of the test
// process. The other tests run real procs.
func inProcess(t *testing.T) {
	inprocTests.Store(t.Name(), true)
	t.Cleanup(func() { inprocTests.Delete(t.Name()) })
}

// rootCtx is the client's ctx of t's runtime: the in-process cluster's
// for a test marked inProcess, else the test binary's own.
func rootCtx(t testing.TB) context.Context {
	for name := t.Name(); ; {
		if _, ok := inprocTests.Load(name); ok {
			return inprocCtx
		}
		i := strings.LastIndexByte(name, '/')
		if i < 0 {
			return clientCtx
		}
		name = name[:i]
	}
}

// testCtx is a context of t's client, bounded for one test step.
func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(rootCtx(t), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// failureLog keeps every failure that reached the test client.
type failureLog struct {
	mu   sync.Mutex
	all  []*actorrt.MeshFailure
	more chan struct{}
}

var failures = &failureLog{more: make(chan struct{}, 1)}

func (l *failureLog) record(f *actorrt.MeshFailure) error {
	l.mu.Lock()
	l.all = append(l.all, f)
	l.mu.Unlock()
	select {
	case l.more <- struct{}{}:
	default:
	}
	return nil
}

// waitFailure waits (bounded) for a failure of the named mesh and returns
// it; each failure is returned once.
func waitFailure(t *testing.T, mesh string) *actorrt.MeshFailure {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		failures.mu.Lock()
		for i, f := range failures.all {
			if f.Mesh == mesh {
				failures.all = append(failures.all[:i:i], failures.all[i+1:]...)
				failures.mu.Unlock()
				return f
			}
		}
		failures.mu.Unlock()
		select {
		case <-failures.more:
		case <-time.After(50 * time.Millisecond):
		case <-deadline:
			t.Fatalf("no failure of mesh %s within 20s", mesh)
		}
	}
}
