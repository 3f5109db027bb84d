// Command killexit is a job run directly (no launcher) on the simulated
// hosts of a local hosts file: a 2 x 2 proc mesh, an actor mesh with a
// restart policy on it, a SIGKILL of one proc; then its function returns
// (-at): once the killed member answers again (restarted), as soon as the
// kill is seen (seen), or while the new proc in the killed one's place is
// starting (start): with the member's restart still on its way. Each
// proc starts under a wrapper that holds it while a file says so. It
// prints on stdout the time its function returned (RETURN <unix ns>), and
// on stderr each failure its fault hook receives (FAULT <unix ns> ...),
// so that a test can measure the exit and see that a kill the job handled
// is not read, at the end, as a fault or a host lost.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/monarch-go/monarch/actorrt"
)

// Member answers where it runs.
type Member struct{}

// PID is the pid of the member's proc.
func (m *Member) PID(ctx *actorrt.Context) (int, error) { return os.Getpid(), nil }

var pid = actorrt.Method((*Member).PID)

func main() {
	hostTimeout := flag.Duration("host-timeout", 0, "the host timeout (WithHostTimeout), if set")
	at := flag.String("at", "restarted", "when to return: restarted, seen (the kill) or start (of the new proc)")
	flag.Parse()
	if err := actorrt.Register[Member](); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	opts := []actorrt.Option{actorrt.WithFaultHook(func(f *actorrt.MeshFailure) error {
		fmt.Fprintf(os.Stderr, "FAULT %d %v\n", time.Now().UnixNano(), f)
		return nil
	})}
	if *hostTimeout > 0 {
		opts = append(opts, actorrt.WithHostTimeout(*hostTimeout))
	}
	actorrt.Main(func(ctx context.Context) error { return run(ctx, *at) }, opts...)
}

// holdWhile is a proc's wrapper: it waits while the file hold is in the
// directory $1 (at most 30s), saying so with the file holding, then runs
// the proc.
const holdWhile = `d=$1; shift; i=0
while [ -e "$d/hold" ] && [ $i -lt 3000 ]; do : > "$d/holding"; sleep 0.01; i=$((i+1)); done
exec "$@"`

func run(ctx context.Context, at string) error {
	dir, err := os.MkdirTemp("", "killexit")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	hosts, err := actorrt.HostsFromConfig(ctx, "MONARCH_HOSTS")
	if err != nil {
		return err
	}
	procs, err := hosts.SpawnProcs(ctx, actorrt.Dims{{"gpus", 2}}, actorrt.WithWrapper(func(actorrt.Point) []string {
		return []string{"sh", "-c", holdWhile, "sh", dir}
	}))
	if err != nil {
		return err
	}
	policy := actorrt.RestartPolicy{MaxRestarts: 3, Window: time.Minute}
	m, err := actorrt.SpawnWith[Member](ctx, procs, "workers", actorrt.SpawnOptions{Restart: &policy})
	if err != nil {
		return err
	}
	victim := m.At("hosts", 1).At("gpus", 1)
	was, err := pid.CallOne(victim).Get(ctx)
	if err != nil {
		return err
	}
	if at == "start" {
		if err := os.WriteFile(filepath.Join(dir, "hold"), nil, 0o600); err != nil {
			return err
		}
	}
	inFlight := pid.CallOne(victim) // fails once the kill is seen
	if err := syscall.Kill(was, syscall.SIGKILL); err != nil {
		return err
	}
	if _, err := inFlight.Get(ctx); !errors.Is(err, actorrt.ErrProcFailed) {
		return fmt.Errorf("a call in flight to the killed proc: %v, want ErrProcFailed", err)
	}
	switch at {
	case "seen":
	case "start":
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(5 * time.Millisecond) {
			if _, err := os.Stat(filepath.Join(dir, "holding")); err == nil {
				break
			}
			if time.Now().After(deadline) {
				return errors.New("no new proc started within 30s")
			}
		}
	case "restarted":
		// Later calls wait for the restart, or fail naming it: ask
		// again until the member answers from its new proc.
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			now, err := pid.CallOne(victim).Get(ctx)
			if err == nil && now != was {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("not restarted within 30s: %v", err)
			}
		}
	default:
		return fmt.Errorf("-at %q: want restarted, seen or start", at)
	}
	fmt.Printf("RETURN %d\n", time.Now().UnixNano())
	return nil
}
