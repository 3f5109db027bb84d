package actorrt_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/monarch-go/monarch/actorrt"
	"golang.org/x/sys/unix"
)

// Bootstrapped tells how its proc was started.
type Bootstrapped struct{}

// Getenv returns the proc's value of a variable.
func (b *Bootstrapped) Getenv(ctx *actorrt.Context, name string) (string, error) {
	return os.Getenv(name), nil
}

// CPUs returns the CPUs the proc may run on, as the kernel says.
func (b *Bootstrapped) CPUs(ctx *actorrt.Context) ([]int, error) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return nil, err
	}
	var cpus []int
	for c := 0; c < len(set)*64; c++ {
		if set.IsSet(c) {
			cpus = append(cpus, c)
		}
	}
	return cpus, nil
}

// TestProcBootstrap: the environment, wrapper and CPU binding of
// SpawnProcs' options reach each proc, by its point.
func TestProcBootstrap(t *testing.T) {
	ctx := testCtx(t)
	ncpu := 0
	var all unix.CPUSet
	if err := unix.SchedGetaffinity(0, &all); err != nil {
		t.Fatal(err)
	}
	ncpu = all.Count()
	if ncpu < 2 {
		t.Skipf("this test binds two procs to two different CPUs; this process may use %d", ncpu)
	}
	var cpus []int
	for c := 0; len(cpus) < 2; c++ {
		if all.IsSet(c) {
			cpus = append(cpus, c)
		}
	}
	procs, err := actorrt.ThisHost(ctx).SpawnProcs(ctx, actorrt.Dims{{"gpus", 2}},
		actorrt.WithProcEnv(func(p actorrt.Point) []string { return []string{fmt.Sprintf("MY_SHARD=shard-%d", p.Rank())} }),
		actorrt.WithWrapper(func(p actorrt.Point) []string {
			return []string{"env", fmt.Sprintf("WRAPPED_AS=%d", p.Rank())}
		}),
		actorrt.WithProcBind(func(p actorrt.Point) []int { return []int{cpus[p.Rank()]} }))
	if err != nil {
		t.Fatal(err)
	}
	defer procs.Stop(ctx)
	m, err := actorrt.Spawn[Bootstrapped](ctx, procs, "boot")
	if err != nil {
		t.Fatal(err)
	}
	getenv := actorrt.Method1((*Bootstrapped).Getenv)
	for _, v := range []struct{ name, format string }{{"MY_SHARD", "shard-%d"}, {"WRAPPED_AS", "%d"}} {
		got, err := getenv.Call(m, v.name).Get(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for p, val := range got.Items() {
			if want := fmt.Sprintf(v.format, p.Rank()); val != want {
				t.Errorf("%v: %s = %q, want %q", p, v.name, val, want)
			}
		}
	}
	got, err := actorrt.Method((*Bootstrapped).CPUs).Call(m).Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for p, c := range got.Items() {
		if want := []int{cpus[p.Rank()]}; !slices.Equal(c, want) {
			t.Errorf("%v: bound to cpus %v, want %v", p, c, want)
		}
	}
}

// TestMasterPort: every proc of a mesh has the same MASTER_PORT, chosen
// free on rank 0's host; two meshes have two.
func TestMasterPort(t *testing.T) {
	ctx := testCtx(t)
	getenv := actorrt.Method1((*Bootstrapped).Getenv)
	portOf := func() string {
		procs, err := actorrt.ThisHost(ctx).SpawnProcs(ctx, actorrt.Dims{{"gpus", 2}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { procs.Stop(ctx) })
		m, err := actorrt.Spawn[Bootstrapped](ctx, procs, "port")
		if err != nil {
			t.Fatal(err)
		}
		got, err := getenv.Call(m, "MASTER_PORT").Get(ctx)
		if err != nil {
			t.Fatal(err)
		}
		v := got.Values()
		if v[0] == "" || v[0] != v[1] {
			t.Fatalf("MASTER_PORT of the two procs: %q", v)
		}
		return v[0]
	}
	a, b := portOf(), portOf()
	if a == b {
		t.Errorf("two meshes share MASTER_PORT %s", a)
	}
}

// TestCommandProcs: WithCommand runs a command on every proc with the
// torchrun variables; Ends tells each one's status; such procs host no
// actors.
func TestCommandProcs(t *testing.T) {
	ctx := testCtx(t)
	dir := t.TempDir()
	script := `echo "$RANK $LOCAL_RANK $WORLD_SIZE $LOCAL_WORLD_SIZE $GROUP_RANK $ROLE_RANK $ROLE_WORLD_SIZE $MASTER_ADDR $MASTER_PORT $TORCHELASTIC_RUN_ID ${CUDA_VISIBLE_DEVICES-none} ${MONARCH_BUS_TOKEN-} ${MONARCH_BUS_URL-}" > "$OUT/$RANK"; [ "$RANK" != 1 ] || echo "rank 1 fails" >&2; exit $((RANK + 3))`
	procs, err := actorrt.ThisHost(ctx).SpawnProcs(ctx, actorrt.Dims{{"gpus", 3}},
		actorrt.WithCommand("sh", "-c", script), actorrt.WithProcEnv(func(actorrt.Point) []string { return []string{"OUT=" + dir} }))
	if err != nil {
		t.Fatal(err)
	}
	defer procs.Stop(ctx)
	if _, err := actorrt.Spawn[Bootstrapped](ctx, procs, "no"); !errors.Is(err, actorrt.ErrBadArgs) {
		t.Errorf("Spawn on command procs: %v, want ErrBadArgs", err)
	}
	statuses := map[int]int{}
	for range 3 {
		select {
		case e := <-procs.Ends():
			statuses[e.Point.Rank()] = e.Status
			if e.Stopped || e.Host == "" || e.Proc == "" || e.At.IsZero() || e.At.After(time.Now()) {
				t.Errorf("end %+v", e)
			}
			// Rank 1 wrote its error to stderr before it ended; the others
			// wrote none.
			if wrote := e.Point.Rank() == 1; wrote == e.ErrAt.IsZero() || e.ErrAt.After(e.At) {
				t.Errorf("rank %d: its last error at %v, ended at %v", e.Point.Rank(), e.ErrAt, e.At)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("ends heard: %v", statuses)
		}
	}
	var port string
	for r := range 3 {
		if statuses[r] != r+3 {
			t.Errorf("rank %d: status %d, want %d", r, statuses[r], r+3)
		}
		b, err := os.ReadFile(filepath.Join(dir, fmt.Sprint(r)))
		if err != nil {
			t.Fatal(err)
		}
		f := strings.Fields(string(b))
		if len(f) != 11 {
			// More would mean the job's bus or secret reached the command.
			t.Fatalf("rank %d wrote %q, want 11 fields", r, b)
		}
		want := []string{fmt.Sprint(r), fmt.Sprint(r), "3", "3", "0", fmt.Sprint(r), "3", "127.0.0.1"}
		if !slices.Equal(f[:8], want) {
			t.Errorf("rank %d: %q, want %q", r, f[:8], want)
		}
		if port == "" {
			port = f[8]
		} else if f[8] != port {
			t.Errorf("rank %d: MASTER_PORT %s, rank 0 %s", r, f[8], port)
		}
		if f[10] != fmt.Sprint(r) {
			t.Errorf("rank %d: CUDA_VISIBLE_DEVICES %s, want its gpus index", r, f[10])
		}
	}
}

// TestCommandNotFound: a command that does not exist fails the spawn,
// naming the command and the host.
func TestCommandNotFound(t *testing.T) {
	ctx := testCtx(t)
	_, err := actorrt.ThisHost(ctx).SpawnProcs(ctx, actorrt.Dims{{"gpus", 2}}, actorrt.WithCommand("no-such-command-here", "x"))
	host, _ := os.Hostname()
	if err == nil || !strings.Contains(err.Error(), "no-such-command-here") || !strings.Contains(err.Error(), " on "+host) {
		t.Fatalf("SpawnProcs of a missing command: %v", err)
	}
}

// TestGPUsDim: CUDA_VISIBLE_DEVICES is the index in the dimension
// WithGPUsDim names, and unset on a mesh without it.
func TestGPUsDim(t *testing.T) {
	ctx := testCtx(t)
	for _, tc := range []struct {
		opts []actorrt.ProcOption
		want []string
	}{
		{[]actorrt.ProcOption{actorrt.WithGPUsDim("dev")}, []string{"0", "1"}},
		{nil, []string{"none", "none"}},
	} {
		dir := t.TempDir()
		opts := append(tc.opts, actorrt.WithCommand("sh", "-c", `echo "${CUDA_VISIBLE_DEVICES-none}" > "$OUT/$RANK"`),
			actorrt.WithProcEnv(func(actorrt.Point) []string { return []string{"OUT=" + dir} }))
		procs, err := actorrt.ThisHost(ctx).SpawnProcs(ctx, actorrt.Dims{{"dev", 2}}, opts...)
		if err != nil {
			t.Fatal(err)
		}
		for range 2 {
			select {
			case <-procs.Ends():
			case <-time.After(30 * time.Second):
				t.Fatal("the commands did not end")
			}
		}
		for r, want := range tc.want {
			b, err := os.ReadFile(filepath.Join(dir, fmt.Sprint(r)))
			if err != nil || strings.TrimSpace(string(b)) != want {
				t.Errorf("rank %d: CUDA_VISIBLE_DEVICES %q (%v), want %s", r, b, err, want)
			}
		}
	}
}
