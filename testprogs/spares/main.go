// Command spares is a job on two hosts whose host 1 is lost: a 2 x 1 proc
// mesh kept with a spare per host (WithSpares(1), and, with -anyhost,
// WithSparesAnyHost), two actor meshes with restart policies on it; the
// member of host 1 kills its host agent (SIGKILL to its parent), which
// takes its procs along. For each mesh it waits until member 1 answers
// again from another proc (-anyhost only), printing "MOVED mesh host pid
// RANK" (where it runs now, and its rank variable), or until its fault
// hook has heard of a member of the mesh, printing "TOLD mesh reason". Every failure the hook receives is also on
// stderr (FAULT ...).
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/monarch-go/monarch/actorrt"
)

// Member answers where it runs.
type Member struct{}

// Where is the member's host, pid and RANK.
func (m *Member) Where(ctx *actorrt.Context) (string, error) {
	host, _ := os.Hostname()
	return fmt.Sprintf("%s %d %s", host, os.Getpid(), os.Getenv("RANK")), nil
}

// KillAgent kills the host agent that started the member's proc.
func (m *Member) KillAgent(ctx *actorrt.Context) error {
	return syscall.Kill(os.Getppid(), syscall.SIGKILL)
}

// Spares counts the spares its host agent keeps: its siblings started
// with MONARCH_SPARE=1.
func (m *Member) Spares(ctx *actorrt.Context) (int, error) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	n := 0
	for _, e := range ents {
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
		if len(f) < 2 || f[1] != strconv.Itoa(os.Getppid()) {
			continue
		}
		env, err := os.ReadFile("/proc/" + e.Name() + "/environ")
		if err == nil && slices.Contains(strings.Split(string(env), "\x00"), "MONARCH_SPARE=1") {
			n++
		}
	}
	return n, nil
}

var (
	where     = actorrt.Method((*Member).Where)
	killAgent = actorrt.VoidMethod((*Member).KillAgent)
	spares    = actorrt.Method((*Member).Spares)
)

var told = struct {
	sync.Mutex
	by map[string]string
}{by: map[string]string{}}

func main() {
	anyHost := flag.Bool("anyhost", false, "WithSparesAnyHost")
	flag.Parse()
	if err := actorrt.Register[Member](); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	hook := actorrt.WithFaultHook(func(f *actorrt.MeshFailure) error {
		fmt.Fprintf(os.Stderr, "FAULT %v\n", f)
		told.Lock()
		told.by[f.Mesh] = f.Reason
		told.Unlock()
		return nil
	})
	actorrt.Main(func(ctx context.Context) error { return run(ctx, *anyHost) }, hook)
}

func run(ctx context.Context, anyHost bool) error {
	hosts, err := actorrt.HostsFromConfig(ctx, "MONARCH_HOSTS")
	if err != nil {
		return err
	}
	opts := []actorrt.ProcOption{actorrt.WithSpares(1)}
	if anyHost {
		opts = append(opts, actorrt.WithSparesAnyHost())
	}
	procs, err := hosts.SpawnProcs(ctx, actorrt.Dims{{"gpus", 1}}, opts...)
	if err != nil {
		return err
	}
	policy := actorrt.RestartPolicy{MaxRestarts: 3, Window: time.Minute}
	var meshes []*actorrt.ActorMesh[Member]
	for _, name := range []string{"spare-a", "spare-b"} {
		m, err := actorrt.SpawnWith[Member](ctx, procs, name, actorrt.SpawnOptions{Restart: &policy})
		if err != nil {
			return err
		}
		meshes = append(meshes, m)
	}
	was, err := where.CallOne(meshes[0].At("hosts", 1)).Get(ctx)
	if err != nil {
		return err
	}
	fmt.Printf("BEFORE %s\n", was)
	// Host 0's spare is started after its procs: wait until it runs.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		n, err := spares.CallOne(meshes[0].At("hosts", 0)).Get(ctx)
		if err != nil {
			return err
		}
		if n >= 1 {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no spare on host 0 within 30s")
		}
	}
	killAgent.Broadcast(meshes[0].At("hosts", 1))
	deadline := time.Now().Add(90 * time.Second)
	for _, m := range meshes {
		for {
			told.Lock()
			reason, ok := told.by[m.Name()]
			told.Unlock()
			if ok {
				fmt.Printf("TOLD %s %s\n", m.Name(), reason)
				break
			}
			if anyHost {
				if now, err := where.CallOne(m.At("hosts", 1)).Get(ctx); err == nil && now != was {
					fmt.Printf("MOVED %s %s\n", m.Name(), now)
					break
				}
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("%s: member 1 neither moved nor failed to its owner within 90s", m.Name())
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return nil
}
