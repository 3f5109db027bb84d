package systest

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/monarch-go/monarch/bus"
	"github.com/monarch-go/monarch/internal/jobenv"
	"github.com/monarch-go/monarch/internal/jobstate"
	"github.com/monarch-go/monarch/internal/testenv"
)

// The failure a job's client reports, and the job's logs by mesh and
// from the client: real monarch and test programs, real NATS.

var (
	meshesOnce sync.Once
	meshesErr  error
)

// meshesProgram builds testprogs/meshes (two named proc meshes)
// beside the monarch binary.
func meshesProgram(t *testing.T) string {
	t.Helper()
	path := filepath.Join(build(t), "meshes")
	meshesOnce.Do(func() {
		out, err := exec.Command("go", "build", "-o", path, "./testprogs/meshes").CombinedOutput()
		if err != nil {
			meshesErr = err
			t.Logf("%s", out)
		}
	})
	if meshesErr != nil {
		t.Fatal(meshesErr)
	}
	return path
}

// failingSPMD is a command for 3 ranks: rank 2 writes to stderr and
// exits 7, the others write a line and wait to be stopped.
var failingSPMD = []string{"sh", "-c", `if [ "$RANK" = 2 ]; then echo "rank 2 trace line 1" >&2; echo "rank 2 boom" >&2; exit 7; fi; echo "rank $RANK up"; sleep 30`}

// onlyRecord reads the single job record of the state dir.
func onlyRecord(t *testing.T, dir string) *jobstate.Record {
	t.Helper()
	recs, err := jobstate.List(dir)
	if err != nil || len(recs) != 1 {
		t.Fatalf("records in %s: %v, %v; want one", dir, recs, err)
	}
	return recs[0]
}

// TestSPMDFailureRecordDirect: an SPMD client run without a launcher
// (monarch spmd directly, the record its own) records what failed: the
// rank, its host, its status, the mesh and its last stderr lines; its
// summary comes last, naming the host once.
func TestSPMDFailureRecordDirect(t *testing.T) {
	dir := stateDir(t)
	host, _ := os.Hostname()
	_, stderr, code := localMonarch(t, time.Minute, []string{"MONARCH_PROCS=gpus=3"}, append([]string{"spmd", "--"}, failingSPMD...)...)
	if code != 7 {
		t.Fatalf("exit %d, want 7\n%s", code, stderr)
	}
	summary := "monarch: rank 2 on " + host + " failed: exited with status 7 ({gpus: 2}); the other 2 ranks were stopped"
	if !strings.Contains(stderr, summary) || strings.Index(stderr, summary) < strings.Index(stderr, "rank 2 boom") {
		t.Errorf("want the summary %q after the rank's lines:\n%s", summary, stderr)
	}
	r := onlyRecord(t, dir)
	want := jobstate.Failure{Summary: "rank 2 on " + host + " exited with status 7", Mesh: "spmd", Rank: 2, Host: host, Exit: 7,
		Tail: []string{"rank 2 trace line 1", "rank 2 boom"}}
	if r.Failure == nil || !sameFailure(*r.Failure, want) || r.State != jobstate.Failed || r.End != "failed: "+want.Summary {
		t.Errorf("record: state %q, end %q, failure %+v; want failed, %+v", r.State, r.End, r.Failure, want)
	}
}

func sameFailure(a, b jobstate.Failure) bool {
	return a.Summary == b.Summary && a.Mesh == b.Mesh && a.Rank == b.Rank && a.Host == b.Host && a.Exit == b.Exit &&
		a.Signal == b.Signal && slices.Equal(a.Tail, b.Tail)
}

// TestSPMDFailureSubject: under a launcher, the SPMD client publishes one
// jobstate.Failure on the job's failure subject before it exits. The test
// is the launcher: it runs the bus, subscribes, and starts the client.
func TestSPMDFailureSubject(t *testing.T) {
	srv, err := bus.StartServer(bus.ServerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown()
	conn, err := bus.ConnectInProcess(srv, bus.ConnOptions{Name: "test launcher"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	const job = "jfailuresubject"
	subject := jobenv.SubjectsOf(job).Failure()
	if _, err := conn.Subscribe(subject); err != nil {
		t.Fatal(err)
	}
	got := make(chan []byte, 4)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go conn.Run(ctx, func(m bus.Message) {
		if m.Subject == subject {
			got <- m.Data
		}
	})
	env := append(jobenv.Env{Job: job, Bus: jobenv.Bus{URL: srv.URL(), Token: srv.Token()}}.Environ(), "MONARCH_PROCS=gpus=3")
	_, stderr, code := localMonarch(t, time.Minute, env, append([]string{"spmd", "--"}, failingSPMD...)...)
	if code != 7 {
		t.Fatalf("exit %d, want 7\n%s", code, stderr)
	}
	host, _ := os.Hostname()
	want := jobstate.Failure{Summary: "rank 2 on " + host + " exited with status 7", Mesh: "spmd", Rank: 2, Host: host, Exit: 7,
		Tail: []string{"rank 2 trace line 1", "rank 2 boom"}}
	select {
	case b := <-got:
		var f jobstate.Failure
		if err := json.Unmarshal(b, &f); err != nil || !sameFailure(f, want) {
			t.Fatalf("failure subject: %s (%v); want %+v", b, err, want)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("nothing on %s after the client exited\n%s", subject, stderr)
	}
	select {
	case b := <-got:
		t.Errorf("a second failure: %s", b)
	case <-time.After(200 * time.Millisecond):
	}
}

// TestSDKFailureRecordDirect: an SDK program whose actor fails after a
// Broadcast (an unhandled MeshFailure: the default fault hook ends it)
// records the failure: the mesh, the member's rank and host.
func TestSDKFailureRecordDirect(t *testing.T) {
	dir := stateDir(t)
	cmd := exec.Command(meshesProgram(t))
	cmd.Env = append(os.Environ(), "MONARCH_STATE_DIR="+dir, "MESHES_FAIL=1")
	out, err := runBounded(cmd, time.Minute)
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
		t.Fatalf("exit %v, want 1\n%s", err, out)
	}
	host, _ := os.Hostname()
	r := onlyRecord(t, dir)
	f := r.Failure
	if f == nil || f.Mesh != "gen" || f.Rank != 0 || f.Host != host || !strings.Contains(f.Summary, "gen fails on purpose") ||
		r.End != "failed: "+f.Summary {
		t.Errorf("record: end %q, failure %+v; want mesh gen, rank 0 on %s, the panic", r.End, f, host)
	}
}

// runBounded runs cmd, killed after d, and returns its combined output.
func runBounded(cmd *exec.Cmd, d time.Duration) (string, error) {
	var out testenv.SyncBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		return "", err
	}
	timer := time.AfterFunc(d, func() { cmd.Process.Kill() })
	defer timer.Stop()
	err := cmd.Wait()
	return out.String(), err
}

// TestLogsMeshesAndClient: a job with two proc meshes prints the lines of
// the first as [0] while it is the only one that printed, then those of
// the second as [gen 0]; monarch logs --mesh picks one, and a
// --mesh that matches nothing lists the job's meshes; the client
// program's own lines are in the log as [client] text, and were printed
// live as they are.
func TestLogsMeshesAndClient(t *testing.T) {
	prog := meshesProgram(t)
	out, stderr, code := localMonarch(t, time.Minute, []string{"MONARCH_JOB_PREFIX=meshes"}, "local", "--", prog)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, stderr)
	}
	for _, want := range []string{"[0] training", "[1] training", "[gen 0] generating", "client: starting\n", "client: done\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("live output lacks %q:\n%s", want, out)
		}
	}
	if !strings.Contains(stderr, "client: a line on stderr\n") || strings.Contains(out+stderr, "[client]") || strings.Contains(out+stderr, "\x00") {
		t.Errorf("live: want the client's lines as it wrote them\nstdout:\n%s\nstderr:\n%s", out, stderr)
	}
	job := onlyRecord(t, stateDir(t)).Job
	logs, lerr, code := localMonarch(t, time.Minute, nil, "logs", job)
	if code != 0 {
		t.Fatalf("logs: exit %d: %s", code, lerr)
	}
	for _, want := range []string{"[client] client: starting", "[client] client: done", "[0] training", "[gen 0] generating"} {
		if !strings.Contains(logs, want) {
			t.Errorf("monarch logs lacks %q:\n%s", want, logs)
		}
	}
	if !strings.Contains(lerr, "[client] client: a line on stderr") {
		t.Errorf("monarch logs: the client's stderr line is not on stderr:\n%s", lerr)
	}
	if strings.Count(logs, "training") != 2 {
		t.Errorf("monarch logs: want each proc's line once:\n%s", logs)
	}
	gen, _, code := localMonarch(t, time.Minute, nil, "logs", job, "--mesh", "gen")
	if code != 0 || strings.TrimSpace(gen) != "[0] generating" {
		t.Errorf("logs --mesh gen: exit %d:\n%s", code, gen)
	}
	both, _, _ := localMonarch(t, time.Minute, nil, "logs", job, "--mesh", "gen", "--mesh", "trainer")
	if strings.Count(both, "training") != 2 || !strings.Contains(both, "generating") || strings.Contains(both, "[client]") {
		t.Errorf("logs --mesh gen --mesh trainer:\n%s", both)
	}
	_, nerr, code := localMonarch(t, time.Minute, nil, "logs", job, "--mesh", "nope")
	if code == 0 || !strings.Contains(nerr, "no lines of mesh nope") || !strings.Contains(nerr, "meshes trainer, gen") {
		t.Errorf("logs --mesh nope: exit %d, want the job's meshes listed:\n%s", code, nerr)
	}
}

// TestLogsClientQuick: a program that prints and fails at once, starting
// nothing, has its lines in the log: the client waits for its own output
// to come back from the launcher before it closes the log.
func TestLogsClientQuick(t *testing.T) {
	prog := meshesProgram(t)
	for i := range 5 {
		_, stderr, code := localMonarch(t, time.Minute, []string{"MESHES_QUICK=1"}, "local", "--", prog)
		if code != 1 || strings.Contains(stderr, "\x00") {
			t.Fatalf("exit %d, want 1\n%q", code, stderr)
		}
		recs, err := jobstate.List(stateDir(t))
		if err != nil || len(recs) != i+1 {
			t.Fatalf("records: %v, %v", recs, err)
		}
		logs, lerr, _ := localMonarch(t, time.Minute, nil, "logs", recs[0].Job)
		if !strings.Contains(logs, "[client] client: quick result 42") || !strings.Contains(lerr, "[client] error: quick failure") {
			t.Fatalf("run %d: monarch logs lacks the client's lines:\nstdout:\n%s\nstderr:\n%s", i, logs, lerr)
		}
	}
}
