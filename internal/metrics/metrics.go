package metrics

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/monarch-go/monarch/internal/jobctl"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Source gives a snapshot of a job's state: the job's client, which asks
// its procs for their figures first (at most twice a second).
type Source interface {
	State(ctx context.Context) (*jobctl.JobState, error)
}

// goRegistry holds this process's own Go metrics, apart from the job's.
var goRegistry = func() *prometheus.Registry {
	r := prometheus.NewRegistry()
	r.MustRegister(collectors.NewGoCollector())
	return r
}()

// Handler serves the job's metrics: for each request, one snapshot from
// src (under the request's context), in Prometheus's text format (or what
// the scraper negotiates). When src fails, the answer is 503 with its
// error. Safe for concurrent use.
func Handler(src Source) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s, err := src.State(r.Context())
		if err == nil && s == nil {
			err = fmt.Errorf("no state")
		}
		if err != nil {
			http.Error(w, "monarch metrics: job state: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		reg := prometheus.NewPedanticRegistry()
		if err := reg.Register(newCollector(s)); err != nil {
			http.Error(w, "monarch metrics: "+err.Error(), http.StatusInternalServerError)
			return
		}
		promhttp.HandlerFor(prometheus.Gatherers{reg, goRegistry}, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError}).ServeHTTP(w, r)
	})
}

var (
	procLabels = []string{"proc", "host", "mesh", "rank"}
	epLabels   = []string{"mesh", "endpoint"}

	descEndpointMessages = prometheus.NewDesc("monarch_endpoint_messages_total", "Calls of an actor mesh's endpoint its members handled.", epLabels, nil)
	descEndpointErrors   = prometheus.NewDesc("monarch_endpoint_errors_total", "Calls of an actor mesh's endpoint that ended in an error (returned, a panic, arguments that did not decode).", epLabels, nil)
	descEndpointDuration = prometheus.NewDesc("monarch_endpoint_duration_seconds", "How long an actor mesh's endpoint's handler ran, of one call in 8 of each member's (its first, then every 8th).", epLabels, nil)
	descCallsSent        = prometheus.NewDesc("monarch_mesh_calls_sent_total", "Calls the job's client sent to an actor mesh's members (a call to n members counts n).", []string{"mesh"}, nil)
	descMembers          = prometheus.NewDesc("monarch_mesh_members", "Members of an actor mesh, by state.", []string{"mesh", "state"}, nil)
	descFailures         = prometheus.NewDesc("monarch_failures_total", "Member failures the client saw.", nil, nil)
	descRestarts         = prometheus.NewDesc("monarch_restarts_total", "Members restarted by their mesh's restart policy.", nil, nil)
	descGaveUp           = prometheus.NewDesc("monarch_restarts_given_up_total", "Members a restart policy gave up on.", nil, nil)
	descUnhandled        = prometheus.NewDesc("monarch_unhandled_failures_total", "Failures that reached the client's fault hook.", nil, nil)
	descProcsEnded       = prometheus.NewDesc("monarch_procs_ended_total", "Procs that ended, stopped ones too.", nil, nil)
	descProcsFailed      = prometheus.NewDesc("monarch_procs_failed_total", "Procs that ended without being stopped.", nil, nil)
	descLogLines         = prometheus.NewDesc("monarch_log_lines_total", "Log lines of the job the client received.", nil, nil)
	descHostsUp          = prometheus.NewDesc("monarch_hosts_up", "Hosts of the job whose agent is up.", nil, nil)
	descProcs            = prometheus.NewDesc("monarch_procs", "Procs the client started, by state.", []string{"state"}, nil)
	descCPU              = prometheus.NewDesc("monarch_proc_cpu_seconds_total", "CPU time (user and system) of a proc, as it said last.", procLabels, nil)
	descRSS              = prometheus.NewDesc("monarch_proc_resident_memory_bytes", "Resident memory of a proc, as it said last.", procLabels, nil)
	descBusInMsgs        = prometheus.NewDesc("monarch_bus_received_messages_total", "Messages a proc's bus connection received (a batch is one).", procLabels, nil)
	descBusOutMsgs       = prometheus.NewDesc("monarch_bus_sent_messages_total", "Messages a proc's bus connection sent (a batch is one).", procLabels, nil)
	descBusInBytes       = prometheus.NewDesc("monarch_bus_received_bytes_total", "Payload bytes a proc's bus connection received.", procLabels, nil)
	descBusOutBytes      = prometheus.NewDesc("monarch_bus_sent_bytes_total", "Payload bytes a proc's bus connection sent.", procLabels, nil)
	descDropped          = prometheus.NewDesc("monarch_dropped_messages_total", "Malformed messages a proc dropped, by kind.", append(procLabels[:4:4], "kind"), nil)
	descCounting         = prometheus.NewDesc("monarch_feed_counting", "1 if the job's processes count messages for the state feed (MONARCH_FEED), else 0.", nil, nil)

	allDescs = []*prometheus.Desc{descEndpointMessages, descEndpointErrors, descEndpointDuration, descCallsSent, descMembers,
		descFailures, descRestarts, descGaveUp, descUnhandled, descProcsEnded, descProcsFailed, descLogLines, descHostsUp, descProcs,
		descCPU, descRSS, descBusInMsgs, descBusOutMsgs, descBusInBytes, descBusOutBytes, descDropped, descCounting}
)

// memberStates and procStates are the states counted, each always sent
// (a zero too), so that a series does not vanish when none is left.
var (
	memberStates = []string{"running", "failed", "restarting", "stopped"}
	procStates   = []string{"running", "stopped", "failed"}
)

// collector emits one snapshot's metrics.
type collector struct{ s *jobctl.JobState }

func newCollector(s *jobctl.JobState) prometheus.Collector { return collector{s} }

func (collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range allDescs {
		ch <- d
	}
}

// meshSum is what the actor meshes of one name add up to.
type meshSum struct {
	sent      uint64
	members   map[string]float64
	endpoints map[string]*jobctl.EndpointState
	epOrder   []string
}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	s := c.s
	// emit sends a metric, or nothing for one it cannot make (a label
	// value that is not UTF-8 is mended first; nothing else can fail).
	emit := func(m prometheus.Metric, err error) {
		if err == nil {
			ch <- m
		}
	}
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		emit(prometheus.NewConstMetric(d, prometheus.GaugeValue, v, clean(labels)...))
	}
	counter := func(d *prometheus.Desc, v float64, labels ...string) {
		emit(prometheus.NewConstMetric(d, prometheus.CounterValue, v, clean(labels)...))
	}

	// Actor meshes, summed by name.
	sums := map[string]*meshSum{}
	var order []string
	for i := range s.ActorMeshes {
		am := &s.ActorMeshes[i]
		ms := sums[am.Name]
		if ms == nil {
			ms = &meshSum{members: map[string]float64{}, endpoints: map[string]*jobctl.EndpointState{}}
			sums[am.Name] = ms
			order = append(order, am.Name)
		}
		ms.sent += am.Sent
		for _, m := range am.Members {
			ms.members[m.State]++
		}
		for _, ep := range am.Endpoints {
			sum := ms.endpoints[ep.Name]
			if sum == nil {
				sum = &jobctl.EndpointState{Name: ep.Name}
				ms.endpoints[ep.Name] = sum
				ms.epOrder = append(ms.epOrder, ep.Name)
			}
			sum.Handled += ep.Handled
			sum.Errors += ep.Errors
			sum.SumSeconds += ep.SumSeconds
			if len(sum.Buckets) < len(ep.Buckets) {
				sum.Buckets = append(sum.Buckets, make([]uint64, len(ep.Buckets)-len(sum.Buckets))...)
			}
			for b, n := range ep.Buckets {
				sum.Buckets[b] += n
			}
		}
	}
	bounds := jobctl.DurationBounds()
	for _, name := range order {
		ms := sums[name]
		counter(descCallsSent, float64(ms.sent), name)
		for _, st := range memberStates {
			gauge(descMembers, ms.members[st], name, st)
		}
		for _, ep := range ms.epOrder {
			e := ms.endpoints[ep]
			counter(descEndpointMessages, float64(e.Handled), name, ep)
			counter(descEndpointErrors, float64(e.Errors), name, ep)
			buckets := make(map[float64]uint64, len(bounds))
			var cum, timed uint64
			for b, le := range bounds {
				if b < len(e.Buckets) {
					cum += e.Buckets[b]
				}
				buckets[le] = cum
			}
			for _, n := range e.Buckets {
				timed += n // the calls timed: the histogram's count
			}
			emit(prometheus.NewConstHistogram(descEndpointDuration, timed, e.SumSeconds, buckets, clean([]string{name, ep})...))
		}
	}

	t := s.Totals
	counter(descFailures, float64(t.Failures))
	counter(descRestarts, float64(t.Restarts))
	counter(descGaveUp, float64(t.GaveUp))
	counter(descUnhandled, float64(t.Unhandled))
	counter(descProcsEnded, float64(t.ProcsEnded))
	counter(descProcsFailed, float64(t.ProcsFailed))
	counter(descLogLines, float64(max(s.LogLines, 0)))
	up := 0.0
	for _, h := range s.Hosts {
		if h.State == "up" {
			up++
		}
	}
	gauge(descHostsUp, up)
	counting := 0.0
	if s.Counting {
		counting = 1
	}
	gauge(descCounting, counting)

	// Procs: the client's, then each proc mesh's. A proc id seen twice
	// (not from a well-formed snapshot) is sent once.
	procs := map[string]float64{}
	seen := map[string]bool{}
	perProc := func(p *jobctl.ProcState, mesh, rank string) {
		if seen[p.Proc] || p.FiguresAt.IsZero() {
			return
		}
		seen[p.Proc] = true
		l := []string{p.Proc, p.Host, mesh, rank}
		counter(descCPU, max(p.CPUSeconds, 0), l...)
		gauge(descRSS, float64(max(p.RSS, 0)), l...)
		if b := p.Bus; b != nil {
			counter(descBusInMsgs, float64(b.InMsgs), l...)
			counter(descBusOutMsgs, float64(b.OutMsgs), l...)
			counter(descBusInBytes, float64(b.InBytes), l...)
			counter(descBusOutBytes, float64(b.OutBytes), l...)
		}
		for kind, n := range p.Dropped {
			counter(descDropped, float64(n), append(l, kind)...)
		}
	}
	perProc(&s.Client, "", "")
	for i := range s.ProcMeshes {
		pm := &s.ProcMeshes[i]
		for j := range pm.Procs {
			p := &pm.Procs[j]
			procs[p.State]++
			perProc(p, pm.Name, strconv.Itoa(p.Rank))
		}
	}
	for _, st := range procStates {
		gauge(descProcs, procs[st], st)
	}
}

// clean makes label values valid UTF-8.
func clean(labels []string) []string {
	for i, v := range labels {
		labels[i] = strings.ToValidUTF8(v, "\uFFFD")
	}
	return labels
}
