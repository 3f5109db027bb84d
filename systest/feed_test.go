package systest

import (
	"context"
	"encoding/json"
	"net/url"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/monarch-go/monarch/internal/jobctl"
	"github.com/monarch-go/monarch/internal/promtest"
)

// feedState asks the job's client for a snapshot of its state.
func feedState(t *testing.T, sock string) *jobctl.JobState {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var s jobctl.JobState
	if err := jobctl.Call(ctx, sock, jobctl.OpState, jobctl.StateRequest{}, &s); err != nil {
		t.Fatalf("state: %v", err)
	}
	return &s
}

// feedUntil asks for snapshots until ok holds (bounded: a minute).
func feedUntil(t *testing.T, sock, what string, ok func(*jobctl.JobState) bool) *jobctl.JobState {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		s := feedState(t, sock)
		if ok(s) {
			return s
		}
		if time.Now().After(deadline) {
			b, _ := json.MarshalIndent(s, "", "  ")
			t.Fatalf("no snapshot with %s within a minute; the last:\n%s", what, b)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func actorMesh(s *jobctl.JobState, name string) *jobctl.ActorMeshState {
	for i := range s.ActorMeshes {
		if s.ActorMeshes[i].Name == name {
			return &s.ActorMeshes[i]
		}
	}
	return nil
}

func procMesh(s *jobctl.JobState, name string) *jobctl.ProcMeshState {
	for i := range s.ProcMeshes {
		if s.ProcMeshes[i].Name == name {
			return &s.ProcMeshes[i]
		}
	}
	return nil
}

// sumSent is the sum of the Sent of am's members: what am's own Sent is.
func sumSent(am *jobctl.ActorMeshState) uint64 {
	var n uint64
	for _, m := range am.Members {
		n += m.Sent
	}
	return n
}

// startFeedJob runs the feed program under monarch local on 2 simulated
// hosts and waits (bounded) until it has printed its members' pids (by
// rank: they are the procs' of workers, rank for rank), member 1 failed
// and it calls member 0.
func startFeedJob(t *testing.T) (*held, map[int]int) {
	t.Helper()
	pidRe := regexp.MustCompile(`PID rank=(\d) pid=(\d+)`)
	pids := map[int]int{}
	ready, fault := false, false
	run := startLocalJob(t, 2, "feed", nil, func(line string) bool {
		if m := pidRe.FindStringSubmatch(line); m != nil {
			r, _ := strconv.Atoi(m[1])
			pids[r], _ = strconv.Atoi(m[2])
		}
		ready = ready || strings.HasSuffix(line, "READY")
		fault = fault || strings.Contains(line, "FAULT") && strings.Contains(line, "feedTestFailure")
		return ready && fault && len(pids) == 4
	})
	return run, pids
}

// TestFeed: the job state feed of a real job (2 hosts of 2 procs under
// monarch local) shows its hosts, proc and actor meshes with their
// extents; counts that grow as the program calls member 0; the member
// that failed, with its reason, and the failure in the events; a proc
// that is killed, and its member, as failed; the streaming op sends
// snapshots until asked to stop.
func TestFeed(t *testing.T) {
	state := t.TempDir()
	t.Setenv("MONARCH_STATE_DIR", state)
	run, pids := startFeedJob(t)
	sock := filepath.Join(state, run.job+".sock")

	s := feedState(t, sock)
	if s.Version != jobctl.StateVersion || s.Job != run.job {
		t.Fatalf("version %d, job %q; want %d, %q", s.Version, s.Job, jobctl.StateVersion, run.job)
	}
	if len(s.Hosts) != 2 {
		t.Errorf("hosts %+v; want 2", s.Hosts)
	}
	for _, h := range s.Hosts {
		if h.State != "up" || h.Name == "" {
			t.Errorf("host %+v: want up, with a name", h)
		}
	}
	pm := procMesh(s, "workers")
	if pm == nil || len(pm.Procs) != 4 || len(pm.Extent) != 2 || pm.Extent[0].Size != 2 || pm.Extent[1] != (jobctl.Dim{Name: "gpus", Size: 2}) {
		t.Fatalf("proc mesh workers: %+v", pm)
	}
	for _, p := range pm.Procs {
		if p.State != "running" || p.PID != pids[p.Rank] {
			t.Errorf("proc %+v: want running, pid %d", p, pids[p.Rank])
		}
	}
	am := actorMesh(s, "pingers")
	if am == nil || len(am.Members) != 4 || len(am.Extent) != 2 || am.Owner != "c" || am.Type != "Pinger" {
		t.Fatalf("actor mesh pingers: %+v", am)
	}
	if m := am.Members[1]; m.State != "failed" || !strings.Contains(m.Reason, "feedTestFailure: failed on purpose") {
		t.Errorf("member 1: %+v; want failed, with its reason", m)
	}
	for _, r := range []int{2, 3} {
		if m := am.Members[r]; m.State != "running" || m.Sent != 3 {
			t.Errorf("member %d: %+v; want running, sent PID, Ping and the Ping to host 1's members", r, m)
		}
	}
	found := false
	for _, e := range s.Events {
		found = found || e.Kind == "failure" && e.Mesh == "pingers" && e.Rank == 1 && strings.Contains(e.Reason, "feedTestFailure")
	}
	if !found {
		t.Errorf("no failure of pingers[1] in the events: %+v", s.Events)
	}

	// Counts grow as the program pings member 0.
	sent0, handled0 := am.Members[0].Sent, am.Members[0].Handled
	s = feedUntil(t, sock, "pingers[0] sent and handled more", func(s *jobctl.JobState) bool {
		m := actorMesh(s, "pingers").Members[0]
		return m.Sent > sent0 && m.Handled > handled0 && m.Handled > 2
	})
	if am := actorMesh(s, "pingers"); am.Sent != sumSent(am) || am.Handled < am.Members[0].Handled {
		t.Errorf("pingers: sent %d (its members' sum %d), handled %d (member 0's %d); want the sum, and at least member 0's", am.Sent, sumSent(am), am.Handled, am.Members[0].Handled)
	}
	if p := procMesh(s, "workers").Procs[0]; p.RSS <= 0 || p.FiguresAt.IsZero() || p.Bus == nil || p.Bus.InMsgs == 0 || p.Bus.OutBytes == 0 {
		t.Errorf("proc 0: %+v; want its memory and bus traffic", p)
	}
	checkFeedFigures(t, s)
	checkFeedMetrics(t, sock)

	// A proc that is killed.
	if err := syscall.Kill(pids[3], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	s = feedUntil(t, sock, "workers 3 failed", func(s *jobctl.JobState) bool {
		p := procMesh(s, "workers").Procs[3]
		m := actorMesh(s, "pingers").Members[3]
		return p.State == "failed" && m.State == "failed"
	})
	if p := procMesh(s, "workers").Procs[3]; p.Reason == "" {
		t.Errorf("killed proc: %+v; want a reason", p)
	}
	found = false
	for _, e := range s.Events {
		found = found || e.Kind == "proc_ended" && e.Proc == procMesh(s, "workers").Procs[3].Proc
	}
	if !found {
		t.Errorf("no end of the killed proc in the events: %+v", s.Events)
	}
	if s.Totals.ProcsEnded < 1 || s.Totals.ProcsFailed < 1 {
		t.Errorf("totals %+v: want the killed proc", s.Totals)
	}

	// The stream: snapshots until asked to stop.
	stop := make(chan struct{})
	var got []jobctl.JobState
	var ans jobctl.WatchAnswer
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := jobctl.CallStream(ctx, sock, jobctl.OpWatch, jobctl.WatchRequest{Interval: 100 * time.Millisecond}, stop, func(ev json.RawMessage) error {
		var s jobctl.JobState
		if err := json.Unmarshal(ev, &s); err != nil {
			return err
		}
		if got = append(got, s); len(got) == 2 {
			close(stop)
		}
		return nil
	}, &ans)
	if err != nil || len(got) < 2 || ans.Sent != len(got) || got[0].Version != jobctl.StateVersion {
		t.Errorf("watch: %v, %d snapshots, answer %+v", err, len(got), ans)
	}
	if len(got) >= 2 && actorMesh(&got[1], "pingers").Members[0].Sent <= actorMesh(&got[0], "pingers").Members[0].Sent &&
		got[1].Seq == got[0].Seq {
		t.Errorf("watch: the second snapshot changed nothing")
	}

	if _, stderr, code := monarch(t, "stop", run.job); code != 0 {
		t.Fatalf("stop: exit %d: %s", code, stderr)
	}
	run.wait(t)
}

// checkFeedFigures checks the endpoint figures, totals and the client's
// own in a snapshot of the feed test program: pingers handled PID on
// every member, Fail once (an error), Ping many times.
func checkFeedFigures(t *testing.T, s *jobctl.JobState) {
	t.Helper()
	if !s.Counting {
		t.Errorf("the feed does not count")
	}
	am := actorMesh(s, "pingers")
	eps := map[string]jobctl.EndpointState{}
	var sum uint64
	for _, ep := range am.Endpoints {
		eps[ep.Name] = ep
		var n uint64
		for _, b := range ep.Buckets {
			n += b
		}
		// One call in TimedEvery of each member's is timed, its first too.
		if n > ep.Handled || n*jobctl.TimedEvery < ep.Handled || n == 0 || len(ep.Buckets) != jobctl.NumDurationBounds+1 || ep.SumSeconds <= 0 {
			t.Errorf("endpoint %+v: buckets do not hold one call in %d of those handled, or no time", ep, jobctl.TimedEvery)
		}
		sum += ep.Handled
	}
	if eps["PID"].Handled != 4 || eps["Fail"].Handled != 1 || eps["Fail"].Errors != 1 || eps["Ping"].Handled < 3 || eps["Ping"].Errors != 0 {
		t.Errorf("pingers endpoints %+v: want PID 4, Fail 1 (an error), Ping 3 or more", am.Endpoints)
	}
	if sum != am.Handled {
		t.Errorf("pingers: endpoints handled %d, the mesh %d", sum, am.Handled)
	}
	if s.Totals.Failures < 1 || s.Totals.Unhandled < 1 {
		t.Errorf("totals %+v: want the failure of pingers[1]", s.Totals)
	}
	if c := s.Client; c.Proc != "c" || c.RSS <= 0 || c.Bus == nil || c.Bus.OutMsgs == 0 {
		t.Errorf("client %+v: want its memory and bus traffic", c)
	}
}

// checkFeedMetrics: a real Prometheus scrapes the job's metrics at its
// dashboard's /metrics, with the job's token, and sees the program's
// calls.
func checkFeedMetrics(t *testing.T, sock string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var dash jobctl.DashboardAnswer
	if err := jobctl.Call(ctx, sock, jobctl.OpDashboard, nil, &dash); err != nil || dash.URL == "" {
		t.Fatalf("dashboard: %+v, %v", dash, err)
	}
	u, err := url.Parse(dash.URL)
	if err != nil {
		t.Fatal(err)
	}
	token := u.Query().Get("token")
	prom := promtest.Start(t, []string{u.Host}, token)
	prom.WaitFor(t, `rate(monarch_endpoint_messages_total{mesh="pingers",endpoint="Ping"}[5s]) > 0`, time.Minute,
		func(got []promtest.Sample) bool { return len(got) == 1 })
	for expr, want := range map[string]float64{
		`monarch_endpoint_errors_total{mesh="pingers",endpoint="Fail"}`:          1,
		`monarch_endpoint_duration_seconds_count{mesh="pingers",endpoint="PID"}`: 4,
		`monarch_mesh_members{mesh="pingers",state="failed"}`:                    1,
		`count(monarch_proc_resident_memory_bytes{mesh="workers"} > 0)`:          4,
		`monarch_hosts_up`: 2,
	} {
		got := prom.WaitFor(t, expr, 30*time.Second, func(got []promtest.Sample) bool { return len(got) == 1 })
		if got[0].Value != want {
			t.Errorf("%s = %v, want %v", expr, got[0].Value, want)
		}
	}
}
