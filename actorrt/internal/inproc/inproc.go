// Package inproc is how actorrt/actortest runs a job's runtimes inside
// the test's process: actorrt fills in its Hooks once, at init, and
// actortest calls them. So actorrt exports nothing for an in-process
// cluster; what it gives is here, for packages under actorrt only.
package inproc

import (
	"context"
	"sync"

	"github.com/monarch-go/monarch/internal/hostagent"
)

// Client is a job's client runtime that runs in this process.
type Client interface {
	// Context carries the runtime, as Main's function's ctx does; it
	// ends when the client is closed.
	Context() context.Context
	// Close stops the procs the client started, then the client and its
	// embedded bus. Idempotent.
	Close()
}

// Proc is a proc of a job that runs in this process: its agent watches
// and stops it as a hostagent.Process.
type Proc interface {
	hostagent.Process
	// Gone is closed once nothing of the proc runs any more (a killed
	// proc is Done at once, but its runtime winds down after); the
	// goroutines of actors left running a call are not waited for.
	Gone() <-chan struct{}
}

// Hooks are what actorrt gives. Options are []actorrt.Option, passed as
// they are (this package cannot name actorrt's types).
type Hooks struct {
	// NewClient starts a client on an embedded hub of its own, its host
	// agent's procs started by starter.
	NewClient func(starter hostagent.Starter, opts any) (Client, error)
	// StartProc starts the proc env describes (hostagent.Starter's
	// list), with the program's options; the procs its agent starts
	// are started by starter.
	StartProc func(env []string, starter hostagent.Starter, opts any) (Proc, error)
	// Hosts starts n simulated hosts from ctx's runtime (a client's) and
	// returns their *actorrt.HostMesh.
	Hosts func(ctx context.Context, n int) (any, error)
	// ProcIDs lists the procs of an *actorrt.ProcMesh (sliced or not).
	ProcIDs func(procs any) []string
}

var (
	once  sync.Once
	hooks Hooks
)

// Set gives the hooks; only the first call counts (actorrt's init).
func Set(h Hooks) { once.Do(func() { hooks = h }) }

// Get returns the hooks actorrt set.
func Get() Hooks { return hooks }
