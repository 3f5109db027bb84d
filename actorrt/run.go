package actorrt

import (
	"context"
	"fmt"
	"os"

	"github.com/monarch-go/monarch/internal/jobenv"
)

// Main runs the program and exits the process with its status; it does
// not return.
//
// Started directly (or by `monarch local`/`monarch run`), the process is
// the client: Main connects to the job's bus (starting an embedded,
// loopback-only one when there is none), runs fn, then stops every proc it
// started and exits 0, or 1 if fn returned an error (printed to stderr).
// SIGINT or SIGTERM cancels fn's ctx, tears the job down and exits 130 (or
// 143).
//
// Started as a proc of a job (by SpawnProcs, in the same binary), Main
// serves actors and never calls fn. Register every actor type before Main.
//
// Main or Run: a program's main calls Main. Run does the same and
// returns the exit status instead of exiting, for a caller that has
// something to do after it: a TestMain ends with os.Exit(actorrt.Run(fn))
// (its fn runs the tests), a main that runs deferred work before it
// exits.
func Main(fn func(ctx context.Context) error, opts ...Option) {
	os.Exit(Run(fn, opts...))
}

// Run is Main without the exit: it does what Main does, in the client
// or in a proc, and returns the exit status Main would exit with. Use it
// where the caller must act on the status itself, above all in a
// TestMain, which runs its tests inside the client and exits with their
// status. The tests reach the runtime through the ctx Run gives (ThisHost,
// Lookup and OpenChannel resolve it from their ctx), so keep it:
//
//	var clientCtx context.Context // the tests' contexts derive from it
//
//	func TestMain(m *testing.M) {
//		os.Exit(actorrt.Run(func(ctx context.Context) error {
//			clientCtx = ctx
//			if m.Run() != 0 {
//				return &actorrt.ExitError{Code: 1}
//			}
//			return nil
//		}))
//	}
//
// Elsewhere use Main.
func Run(fn func(ctx context.Context) error, opts ...Option) int {
	env, err := jobenv.FromEnviron()
	if err != nil {
		fmt.Fprintln(os.Stderr, "actorrt:", err)
		return 1
	}
	o, err := runtimeOptions(env, opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	if env.Proc != nil {
		return runWorker(o, env)
	}
	return runClient(fn, o, env)
}

// IsProc reports whether this process was started as a proc of a job (in
// worker mode) rather than as a client.
func IsProc() bool { return jobenv.IsProc() }

// runtimeOptions are the options of a runtime of the job env describes:
// the job's [health], the defaults, then opts.
func runtimeOptions(env jobenv.Env, opts []Option) (options, error) {
	o := defaultOptions(env.HealthOrDefault())
	if env.Health == nil {
		// No launcher, so no link watcher to confirm a silence: the
		// hosts are this program's own procs, whose ends it sees, and a
		// silent one is lost at the host timeout.
		o.lostAfter = o.hostTimeout
	}
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return o, err
		}
	}
	return o, nil
}
