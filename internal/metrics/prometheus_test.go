package metrics

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/monarch-go/monarch/internal/promtest"
)

// TestPrometheus: a real Prometheus scrapes Handler, mounted as the job's
// dashboard mounts it (behind a bearer token), and its queries give the
// snapshot's figures back: counters, the endpoint histogram through
// histogram_quantile, per-proc series with their labels.
func TestPrometheus(t *testing.T) {
	const token = "s3cret-token"
	mux := http.NewServeMux()
	h := Handler(source{s: sample()})
	mux.Handle("/metrics", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+token {
			http.Error(w, "no", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}))
	srv := httptest.NewServer(mux) // on loopback
	defer srv.Close()

	prom := promtest.Start(t, []string{strings.TrimPrefix(srv.URL, "http://")}, token)
	one := func(got []promtest.Sample) bool { return len(got) == 1 }
	prom.WaitFor(t, `up{job="monarch"} == 1`, 30*time.Second, one)

	checks := []struct {
		expr string
		want float64
	}{
		{`monarch_endpoint_messages_total{mesh="pingers",endpoint="Ping"}`, 7},
		{`monarch_endpoint_errors_total{mesh="pingers",endpoint="Ping"}`, 1},
		{`monarch_endpoint_duration_seconds_count{mesh="pingers",endpoint="Slow"}`, 3},
		// 3 Slow calls: 2 in (0.8 ms, 1.6 ms], 1 over the last bound: the
		// median, rank 1.5, is 3/4 of the way through the first of those.
		{`histogram_quantile(0.5, monarch_endpoint_duration_seconds_bucket{endpoint="Slow"})`, 0.0014},
		{`monarch_mesh_members{mesh="pingers",state="running"}`, 1},
		{`monarch_failures_total`, 3},
		{`monarch_hosts_up`, 1},
		{`monarch_proc_cpu_seconds_total{proc="p0",host="h0",mesh="workers",rank="0"}`, 1.5},
		{`monarch_bus_sent_bytes_total{proc="p0"}`, 400},
		{`monarch_dropped_messages_total{proc="p0",kind="bus-chunk"}`, 2},
		{`monarch_proc_resident_memory_bytes{proc="c"}`, 5000},
	}
	for _, c := range checks {
		got := prom.WaitFor(t, c.expr, 30*time.Second, one)
		if v := got[0].Value; v < c.want*0.999 || v > c.want*1.001 {
			t.Errorf("%s = %v, want %v", c.expr, v, c.want)
		}
	}
}
