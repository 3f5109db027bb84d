package metrics

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/monarch-go/monarch/internal/jobctl"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// sample is a snapshot of a small job: two hosts (one gone), a proc mesh
// of three (one failed, one a command-like proc without figures), an
// actor mesh of three members with two endpoints, and a stopped mesh of
// the same name.
func sample() *jobctl.JobState {
	at := time.Unix(1700000000, 0)
	buckets := func(pairs ...int) []uint64 {
		b := make([]uint64, jobctl.NumDurationBounds+1)
		for i := 0; i+1 < len(pairs); i += 2 {
			b[pairs[i]] = uint64(pairs[i+1])
		}
		return b
	}
	return &jobctl.JobState{
		Version: jobctl.StateVersion, Job: "j1", At: at, Counting: true,
		Hosts: []jobctl.HostState{{Agent: "a0", Name: "h0", State: "up"}, {Agent: "a1", Name: "h1", State: "gone", Reason: "lost"}},
		ProcMeshes: []jobctl.ProcMeshState{{Name: "workers", Procs: []jobctl.ProcState{
			{Proc: "p0", Rank: 0, Host: "h0", State: "running", CPUSeconds: 1.5, RSS: 1000, FiguresAt: at,
				Bus: &jobctl.BusState{InMsgs: 10, OutMsgs: 20, InBytes: 300, OutBytes: 400}, Dropped: map[string]uint64{"bus-chunk": 2}},
			{Proc: "p1", Rank: 1, Host: "h1", State: "failed", Reason: "killed", CPUSeconds: 0.25, RSS: 2000, FiguresAt: at},
			{Proc: "p2", Rank: 2, Host: "h1", State: "running"},
		}}},
		ActorMeshes: []jobctl.ActorMeshState{
			{ID: "c.1", Name: "pingers", Sent: 7, Handled: 9, Members: []jobctl.MemberState{
				{Rank: 0, State: "running"}, {Rank: 1, State: "failed"}, {Rank: 2, State: "restarting"}},
				Endpoints: []jobctl.EndpointState{
					{Name: "Ping", Handled: 6, Errors: 1, Buckets: buckets(0, 4, 3, 2), SumSeconds: 0.001},
					{Name: "Slow", Handled: 3, Buckets: buckets(16, 1, 5, 2), SumSeconds: 2.5},
				}},
			{ID: "c.0", Name: "pingers", Stopped: true, Sent: 1, Members: []jobctl.MemberState{{Rank: 0, State: "stopped"}},
				Endpoints: []jobctl.EndpointState{{Name: "Ping", Handled: 1, Buckets: buckets(0, 1), SumSeconds: 0.00001}}},
		},
		Totals:   jobctl.Totals{Failures: 3, Restarts: 2, GaveUp: 1, Unhandled: 1, ProcsEnded: 4, ProcsFailed: 1},
		LogLines: 42,
		Client: jobctl.ProcState{Proc: "c", Host: "h0", State: "running", CPUSeconds: 3, RSS: 5000, FiguresAt: at,
			Bus: &jobctl.BusState{InMsgs: 1, OutMsgs: 2, InBytes: 3, OutBytes: 4}},
	}
}

func TestCollectorCounters(t *testing.T) {
	c := newCollector(sample())
	want := `
# HELP monarch_endpoint_messages_total Calls of an actor mesh's endpoint its members handled.
# TYPE monarch_endpoint_messages_total counter
monarch_endpoint_messages_total{endpoint="Ping",mesh="pingers"} 7
monarch_endpoint_messages_total{endpoint="Slow",mesh="pingers"} 3
# HELP monarch_endpoint_errors_total Calls of an actor mesh's endpoint that ended in an error (returned, a panic, arguments that did not decode).
# TYPE monarch_endpoint_errors_total counter
monarch_endpoint_errors_total{endpoint="Ping",mesh="pingers"} 1
monarch_endpoint_errors_total{endpoint="Slow",mesh="pingers"} 0
# HELP monarch_mesh_calls_sent_total Calls the job's client sent to an actor mesh's members (a call to n members counts n).
# TYPE monarch_mesh_calls_sent_total counter
monarch_mesh_calls_sent_total{mesh="pingers"} 8
# HELP monarch_mesh_members Members of an actor mesh, by state.
# TYPE monarch_mesh_members gauge
monarch_mesh_members{mesh="pingers",state="failed"} 1
monarch_mesh_members{mesh="pingers",state="restarting"} 1
monarch_mesh_members{mesh="pingers",state="running"} 1
monarch_mesh_members{mesh="pingers",state="stopped"} 1
# HELP monarch_failures_total Member failures the client saw.
# TYPE monarch_failures_total counter
monarch_failures_total 3
# HELP monarch_restarts_total Members restarted by their mesh's restart policy.
# TYPE monarch_restarts_total counter
monarch_restarts_total 2
# HELP monarch_restarts_given_up_total Members a restart policy gave up on.
# TYPE monarch_restarts_given_up_total counter
monarch_restarts_given_up_total 1
# HELP monarch_unhandled_failures_total Failures that reached the client's fault hook.
# TYPE monarch_unhandled_failures_total counter
monarch_unhandled_failures_total 1
# HELP monarch_procs_ended_total Procs that ended, stopped ones too.
# TYPE monarch_procs_ended_total counter
monarch_procs_ended_total 4
# HELP monarch_procs_failed_total Procs that ended without being stopped.
# TYPE monarch_procs_failed_total counter
monarch_procs_failed_total 1
# HELP monarch_log_lines_total Log lines of the job the client received.
# TYPE monarch_log_lines_total counter
monarch_log_lines_total 42
# HELP monarch_hosts_up Hosts of the job whose agent is up.
# TYPE monarch_hosts_up gauge
monarch_hosts_up 1
# HELP monarch_procs Procs the client started, by state.
# TYPE monarch_procs gauge
monarch_procs{state="failed"} 1
monarch_procs{state="running"} 2
monarch_procs{state="stopped"} 0
# HELP monarch_feed_counting 1 if the job's processes count messages for the state feed (MONARCH_FEED), else 0.
# TYPE monarch_feed_counting gauge
monarch_feed_counting 1
`
	names := []string{"monarch_endpoint_messages_total", "monarch_endpoint_errors_total", "monarch_mesh_calls_sent_total", "monarch_mesh_members",
		"monarch_failures_total", "monarch_restarts_total", "monarch_restarts_given_up_total", "monarch_unhandled_failures_total",
		"monarch_procs_ended_total", "monarch_procs_failed_total", "monarch_log_lines_total", "monarch_hosts_up", "monarch_procs", "monarch_feed_counting"}
	if err := testutil.CollectAndCompare(c, strings.NewReader(want), names...); err != nil {
		t.Error(err)
	}
}

func TestCollectorProcs(t *testing.T) {
	c := newCollector(sample())
	want := `
# HELP monarch_proc_cpu_seconds_total CPU time (user and system) of a proc, as it said last.
# TYPE monarch_proc_cpu_seconds_total counter
monarch_proc_cpu_seconds_total{host="h0",mesh="",proc="c",rank=""} 3
monarch_proc_cpu_seconds_total{host="h0",mesh="workers",proc="p0",rank="0"} 1.5
monarch_proc_cpu_seconds_total{host="h1",mesh="workers",proc="p1",rank="1"} 0.25
# HELP monarch_proc_resident_memory_bytes Resident memory of a proc, as it said last.
# TYPE monarch_proc_resident_memory_bytes gauge
monarch_proc_resident_memory_bytes{host="h0",mesh="",proc="c",rank=""} 5000
monarch_proc_resident_memory_bytes{host="h0",mesh="workers",proc="p0",rank="0"} 1000
monarch_proc_resident_memory_bytes{host="h1",mesh="workers",proc="p1",rank="1"} 2000
# HELP monarch_bus_received_messages_total Messages a proc's bus connection received (a batch is one).
# TYPE monarch_bus_received_messages_total counter
monarch_bus_received_messages_total{host="h0",mesh="",proc="c",rank=""} 1
monarch_bus_received_messages_total{host="h0",mesh="workers",proc="p0",rank="0"} 10
# HELP monarch_bus_sent_bytes_total Payload bytes a proc's bus connection sent.
# TYPE monarch_bus_sent_bytes_total counter
monarch_bus_sent_bytes_total{host="h0",mesh="",proc="c",rank=""} 4
monarch_bus_sent_bytes_total{host="h0",mesh="workers",proc="p0",rank="0"} 400
# HELP monarch_dropped_messages_total Malformed messages a proc dropped, by kind.
# TYPE monarch_dropped_messages_total counter
monarch_dropped_messages_total{host="h0",kind="bus-chunk",mesh="workers",proc="p0",rank="0"} 2
`
	names := []string{"monarch_proc_cpu_seconds_total", "monarch_proc_resident_memory_bytes", "monarch_bus_received_messages_total",
		"monarch_bus_sent_bytes_total", "monarch_dropped_messages_total"}
	if err := testutil.CollectAndCompare(c, strings.NewReader(want), names...); err != nil {
		t.Error(err)
	}
}

// The histogram: cumulative buckets at the feed's bounds, the calls over
// the last bound in +Inf only, the stopped mesh's added.
func TestCollectorHistogram(t *testing.T) {
	c := newCollector(sample())
	want := `
# HELP monarch_endpoint_duration_seconds How long an actor mesh's endpoint's handler ran, of one call in 8 of each member's (its first, then every 8th).
# TYPE monarch_endpoint_duration_seconds histogram
monarch_endpoint_duration_seconds_bucket{endpoint="Ping",mesh="pingers",le="5e-05"} 5
monarch_endpoint_duration_seconds_bucket{endpoint="Ping",mesh="pingers",le="0.0001"} 5
monarch_endpoint_duration_seconds_bucket{endpoint="Ping",mesh="pingers",le="0.0002"} 5
monarch_endpoint_duration_seconds_bucket{endpoint="Ping",mesh="pingers",le="0.0004"} 7
monarch_endpoint_duration_seconds_bucket{endpoint="Ping",mesh="pingers",le="0.0008"} 7
monarch_endpoint_duration_seconds_bucket{endpoint="Ping",mesh="pingers",le="0.0016"} 7
monarch_endpoint_duration_seconds_bucket{endpoint="Ping",mesh="pingers",le="0.0032"} 7
monarch_endpoint_duration_seconds_bucket{endpoint="Ping",mesh="pingers",le="0.0064"} 7
monarch_endpoint_duration_seconds_bucket{endpoint="Ping",mesh="pingers",le="0.0128"} 7
monarch_endpoint_duration_seconds_bucket{endpoint="Ping",mesh="pingers",le="0.0256"} 7
monarch_endpoint_duration_seconds_bucket{endpoint="Ping",mesh="pingers",le="0.0512"} 7
monarch_endpoint_duration_seconds_bucket{endpoint="Ping",mesh="pingers",le="0.1024"} 7
monarch_endpoint_duration_seconds_bucket{endpoint="Ping",mesh="pingers",le="0.2048"} 7
monarch_endpoint_duration_seconds_bucket{endpoint="Ping",mesh="pingers",le="0.4096"} 7
monarch_endpoint_duration_seconds_bucket{endpoint="Ping",mesh="pingers",le="0.8192"} 7
monarch_endpoint_duration_seconds_bucket{endpoint="Ping",mesh="pingers",le="1.6384"} 7
monarch_endpoint_duration_seconds_bucket{endpoint="Ping",mesh="pingers",le="+Inf"} 7
monarch_endpoint_duration_seconds_sum{endpoint="Ping",mesh="pingers"} 0.00101
monarch_endpoint_duration_seconds_count{endpoint="Ping",mesh="pingers"} 7
monarch_endpoint_duration_seconds_bucket{endpoint="Slow",mesh="pingers",le="5e-05"} 0
monarch_endpoint_duration_seconds_bucket{endpoint="Slow",mesh="pingers",le="0.0001"} 0
monarch_endpoint_duration_seconds_bucket{endpoint="Slow",mesh="pingers",le="0.0002"} 0
monarch_endpoint_duration_seconds_bucket{endpoint="Slow",mesh="pingers",le="0.0004"} 0
monarch_endpoint_duration_seconds_bucket{endpoint="Slow",mesh="pingers",le="0.0008"} 0
monarch_endpoint_duration_seconds_bucket{endpoint="Slow",mesh="pingers",le="0.0016"} 2
monarch_endpoint_duration_seconds_bucket{endpoint="Slow",mesh="pingers",le="0.0032"} 2
monarch_endpoint_duration_seconds_bucket{endpoint="Slow",mesh="pingers",le="0.0064"} 2
monarch_endpoint_duration_seconds_bucket{endpoint="Slow",mesh="pingers",le="0.0128"} 2
monarch_endpoint_duration_seconds_bucket{endpoint="Slow",mesh="pingers",le="0.0256"} 2
monarch_endpoint_duration_seconds_bucket{endpoint="Slow",mesh="pingers",le="0.0512"} 2
monarch_endpoint_duration_seconds_bucket{endpoint="Slow",mesh="pingers",le="0.1024"} 2
monarch_endpoint_duration_seconds_bucket{endpoint="Slow",mesh="pingers",le="0.2048"} 2
monarch_endpoint_duration_seconds_bucket{endpoint="Slow",mesh="pingers",le="0.4096"} 2
monarch_endpoint_duration_seconds_bucket{endpoint="Slow",mesh="pingers",le="0.8192"} 2
monarch_endpoint_duration_seconds_bucket{endpoint="Slow",mesh="pingers",le="1.6384"} 2
monarch_endpoint_duration_seconds_bucket{endpoint="Slow",mesh="pingers",le="+Inf"} 3
monarch_endpoint_duration_seconds_sum{endpoint="Slow",mesh="pingers"} 2.5
monarch_endpoint_duration_seconds_count{endpoint="Slow",mesh="pingers"} 3
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want), "monarch_endpoint_duration_seconds"); err != nil {
		t.Error(err)
	}
}

// Odd snapshots: empty, duplicated procs and meshes, labels that are not
// UTF-8, buckets too many or too few, negative figures. The registry
// checks what is collected (a pedantic one: duplicates, types, help).
func TestCollectorOddInput(t *testing.T) {
	odd := sample()
	odd.ProcMeshes = append(odd.ProcMeshes, odd.ProcMeshes[0]) // every proc twice
	odd.ActorMeshes[0].Name = "bad\xffname"
	odd.ActorMeshes[0].Endpoints[0].Buckets = make([]uint64, 40)
	odd.ActorMeshes[0].Endpoints[1].Buckets = nil
	odd.Client.RSS, odd.Client.CPUSeconds, odd.LogLines = -1, -2, -3
	for _, s := range []*jobctl.JobState{{}, odd} {
		reg := prometheus.NewPedanticRegistry()
		if err := reg.Register(newCollector(s)); err != nil {
			t.Fatal(err)
		}
		if _, err := reg.Gather(); err != nil {
			t.Errorf("gather: %v", err)
		}
	}
}

type source struct {
	s   *jobctl.JobState
	err error
}

func (s source) State(context.Context) (*jobctl.JobState, error) { return s.s, s.err }

func TestHandler(t *testing.T) {
	srv := httptest.NewServer(Handler(source{s: sample()}))
	defer srv.Close()
	body := get(t, srv.URL, http.StatusOK)
	for _, want := range []string{`monarch_endpoint_messages_total{endpoint="Ping",mesh="pingers"} 7`, "go_goroutines "} {
		if !strings.Contains(body, want) {
			t.Errorf("no %q in:\n%s", want, body)
		}
	}
	if err := testutil.ScrapeAndCompare(srv.URL, strings.NewReader("# HELP monarch_hosts_up Hosts of the job whose agent is up.\n# TYPE monarch_hosts_up gauge\nmonarch_hosts_up 1\n"), "monarch_hosts_up"); err != nil {
		t.Error(err)
	}

	bad := httptest.NewServer(Handler(source{err: errors.New("the job ended")}))
	defer bad.Close()
	if body := get(t, bad.URL, http.StatusServiceUnavailable); !strings.Contains(body, "the job ended") {
		t.Errorf("answer %q: want the source's error", body)
	}
}

func get(t *testing.T, url string, code int) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != code {
		t.Fatalf("status %d, want %d: %s", resp.StatusCode, code, b)
	}
	return string(b)
}
