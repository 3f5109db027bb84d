package jobview

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
	"github.com/monarch-go/monarch/internal/jobctl"
)

// TestModel runs the scripts in testdata/model: events into a Model, and
// the snapshots it gives. Times are offsets from the script's start.
// Commands (ranks are base ranks; reasons one word):
//
//	heard agent=h0 at=1s                       a heartbeat
//	mesh id=c.1 name=w type=Echo procs=(p0,p1) extent=gpus:2 [owner=p0]
//	stopped id=c.1                             prints the id the model forgot, if any
//	failed id=c.1 mesh=w rank=1 proc=p1 reason=R at=2s
//	proc-ended proc=p1 reason=R at=3s [stopped]
//	moved id=c.1 ranks=(1) proc=p2
//	restart-done id=c.1 ranks=(1) [failed=(1) reason=R]
//	unhandled id=c.1 mesh=w rank=1 proc=p1 reason=R at=3s
//	supervising id=c.1 mesh=w rank=1 proc=p1 reason=R
//	restarting id=c.1 ranks=(1) actor=A reason=R at=3s
//	gave-up id=c.1 ranks=(1) reason=R at=3s
//	figures at=4s                              a round of answers, one a line:
//	p0 {"CPUTicks":250,"Handled":[...]}        its Figures as JSON, or "-" for none
//
// and what the runtime knows beside the model (Live), for the snapshots:
//
//	procmesh name=hosts extent=hosts:2 [replaces=p1] [command]  its procs, one a line:
//	p0 h0 node0 100                            <id> <agent> <host> <pid>
//	gone id=p1 reason=R [stopped]              a proc or agent ended
//	hostof proc=p0 host=node1                  where a proc announced it runs
//	sent id=c.1 whole=2 one=(1,0)              what the client sent to a mesh
//	log proc=p0 text=hello at=1s               a line received
//	snapshot at=5s                             the job's state, rendered
//
// go test -run TestModel -rewrite ./internal/jobview rewrites the
// expected output; read the diff before keeping it.
func TestModel(t *testing.T) {
	datadriven.Walk(t, "testdata/model", func(t *testing.T, path string) {
		epoch := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		m := NewModel()
		live := Live{Job: "j1", Client: jobctl.ProcState{Proc: "c", Host: "node0", PID: 1}, Counting: true}
		gone := map[string]Gone{}
		hostOf := map[string]string{}
		sent := map[string]*Sent{}
		live.Gone = func(id string) (Gone, bool) { g, ok := gone[id]; return g, ok }
		live.HostOf = func(p string) string { return hostOf[p] }
		live.Sent = func(id string) *Sent { return sent[id] }
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			str := func(key string) string {
				var s string
				if d.HasArg(key) {
					d.ScanArgs(t, key, &s)
				}
				return s
			}
			num := func(key string) int {
				n, err := strconv.Atoi(str(key))
				if err != nil {
					d.Fatalf(t, "%s: %v", key, err)
				}
				return n
			}
			ranks := func(key string) []int {
				var out []int
				if d.HasArg(key) {
					d.ScanArgs(t, key, &out)
				}
				return out
			}
			at := func() time.Time {
				off, err := time.ParseDuration(str("at"))
				if err != nil {
					d.Fatalf(t, "at: %v", err)
				}
				return epoch.Add(off)
			}
			failure := func() Failure {
				return Failure{MeshID: str("id"), Mesh: str("mesh"), Base: num("rank"), ActorID: str("actor"), Proc: str("proc"), Reason: str("reason")}
			}
			switch d.Cmd {
			case "heard":
				m.Heard(str("agent"), at())
			case "mesh":
				var procs []string
				d.ScanArgs(t, "procs", &procs)
				m.MeshAdded(Mesh{ID: str("id"), Name: str("name"), Type: str("type"), Owner: str("owner"), Procs: procs, Extent: extent(t, d, str("extent"))})
			case "stopped":
				if forgot := m.MeshStopped(str("id")); forgot != "" {
					return "forgot " + forgot
				}
			case "failed":
				m.Failed(at(), failure())
			case "proc-ended":
				m.ProcEnded(at(), str("proc"), str("reason"), d.HasArg("stopped"))
			case "moved":
				m.Moved(str("id"), ranks("ranks"), str("proc"))
			case "restart-done":
				var failed []Failure
				for _, b := range ranks("failed") {
					failed = append(failed, Failure{MeshID: str("id"), Base: b, Reason: str("reason")})
				}
				m.RestartDone(str("id"), ranks("ranks"), failed)
			case "unhandled":
				m.Unhandled(at(), failure())
			case "supervising":
				m.Supervising(failure())
			case "restarting":
				m.Restarting(at(), str("id"), ranks("ranks"), Failure{ActorID: str("actor"), Reason: str("reason")})
			case "gave-up":
				m.GaveUp(at(), str("id"), ranks("ranks"), str("reason"))
			case "figures":
				var round []Answer
				for _, line := range lines(d.Input) {
					proc, js, _ := strings.Cut(line, " ")
					a := Answer{Proc: proc, At: at()}
					if js != "-" {
						a.Figures = &Figures{}
						if err := json.Unmarshal([]byte(js), a.Figures); err != nil {
							d.Fatalf(t, "%s: %v", line, err)
						}
					}
					round = append(round, a)
				}
				m.FiguresAnswered(round)
			case "procmesh":
				pm := ProcMesh{Name: str("name"), Extent: extent(t, d, str("extent")), Command: d.HasArg("command"), Replaces: str("replaces")}
				for _, line := range lines(d.Input) {
					f := strings.Fields(line)
					if len(f) != 4 {
						d.Fatalf(t, "want <id> <agent> <host> <pid>: %q", line)
					}
					pid, _ := strconv.Atoi(f[3])
					pm.Procs = append(pm.Procs, Proc{ID: f[0], Agent: f[1], Host: f[2], PID: pid})
				}
				live.ProcMeshes = append(live.ProcMeshes, pm)
			case "gone":
				gone[str("id")] = Gone{Reason: str("reason"), Stopped: d.HasArg("stopped")}
			case "hostof":
				hostOf[str("proc")] = str("host")
			case "sent":
				s := &Sent{Whole: uint64(num("whole"))}
				for _, n := range ranks("one") {
					s.One = append(s.One, uint64(n))
				}
				sent[str("id")] = s
			case "log":
				live.Logs = append(live.Logs, jobctl.LogLine{At: at(), Proc: str("proc"), Stream: "stdout", Text: str("text")})
				live.LogLines++
			case "snapshot":
				live.At = at()
				return render(m.Snapshot(live), epoch)
			default:
				d.Fatalf(t, "unknown command %s", d.Cmd)
			}
			return ""
		})
	})
}

func lines(s string) []string {
	var out []string
	for _, l := range strings.Split(strings.TrimSpace(s), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out
}

// extent reads "gpus:2,hosts:3".
func extent(t *testing.T, d *datadriven.TestData, s string) jobctl.Extent {
	out := jobctl.Extent{}
	for _, dim := range strings.Split(s, ",") {
		name, size, ok := strings.Cut(dim, ":")
		n, err := strconv.Atoi(size)
		if !ok || err != nil {
			d.Fatalf(t, "extent %q: want name:size,...", s)
		}
		out = append(out, jobctl.Dim{Name: name, Size: n})
	}
	return out
}

// render is a snapshot as the scripts show it: times as offsets from
// epoch, what is zero left out.
func render(s *jobctl.JobState, epoch time.Time) string {
	var b strings.Builder
	off := func(t time.Time) string {
		if t.IsZero() {
			return "-"
		}
		return t.Sub(epoch).String()
	}
	fmt.Fprintf(&b, "job %s at %s seq %d counting %v\n", s.Job, off(s.At), s.Seq, s.Counting)
	t := s.Totals
	fmt.Fprintf(&b, "totals failures=%d restarts=%d gave_up=%d unhandled=%d procs_ended=%d procs_failed=%d\n",
		t.Failures, t.Restarts, t.GaveUp, t.Unhandled, t.ProcsEnded, t.ProcsFailed)
	proc := func(indent string, p jobctl.ProcState) {
		fmt.Fprintf(&b, "%sproc %s rank=%d host=%s pid=%d %s", indent, p.Proc, p.Rank, p.Host, p.PID, p.State)
		if p.Reason != "" {
			fmt.Fprintf(&b, " (%s)", p.Reason)
		}
		if p.Respawns > 0 {
			fmt.Fprintf(&b, " respawns=%d", p.Respawns)
		}
		if !p.FiguresAt.IsZero() {
			fmt.Fprintf(&b, " cpu=%.2fs rss=%d figures@%s", p.CPUSeconds, p.RSS, off(p.FiguresAt))
			if p.Bus != nil && p.Bus.InMsgs+p.Bus.OutMsgs > 0 {
				fmt.Fprintf(&b, " bus=%d/%d", p.Bus.InMsgs, p.Bus.OutMsgs)
			}
			for _, k := range slices.Sorted(maps.Keys(p.Dropped)) {
				fmt.Fprintf(&b, " dropped:%s=%d", k, p.Dropped[k])
			}
		}
		b.WriteString("\n")
	}
	proc("client ", s.Client)
	for _, h := range s.Hosts {
		fmt.Fprintf(&b, "host %s name=%s %s", h.Agent, h.Name, h.State)
		if h.Reason != "" {
			fmt.Fprintf(&b, " (%s)", h.Reason)
		}
		fmt.Fprintf(&b, " heard@%s\n", off(h.LastHeartbeat))
	}
	for _, pm := range s.ProcMeshes {
		fmt.Fprintf(&b, "procmesh %s %v command=%v\n", pm.Name, pm.Extent, pm.Command)
		for _, p := range pm.Procs {
			proc("  ", p)
		}
	}
	for _, am := range s.ActorMeshes {
		fmt.Fprintf(&b, "actormesh %s name=%s type=%s owner=%s %v sent=%d handled=%d", am.ID, am.Name, am.Type, am.Owner, am.Extent, am.Sent, am.Handled)
		if am.Stopped {
			b.WriteString(" stopped")
		}
		b.WriteString("\n")
		for _, mem := range am.Members {
			fmt.Fprintf(&b, "  member %d proc=%s %s", mem.Rank, mem.Proc, mem.State)
			if mem.Reason != "" {
				fmt.Fprintf(&b, " (%s)", mem.Reason)
			}
			fmt.Fprintf(&b, " sent=%d handled=%d\n", mem.Sent, mem.Handled)
		}
		for _, ep := range am.Endpoints {
			fmt.Fprintf(&b, "  endpoint %s handled=%d errors=%d sum=%gs buckets=%v\n", ep.Name, ep.Handled, ep.Errors, ep.SumSeconds, ep.Buckets)
		}
	}
	for _, e := range s.Events {
		fmt.Fprintf(&b, "event @%s %s mesh=%s rank=%d", off(e.At), e.Kind, e.Mesh, e.Rank)
		if len(e.Ranks) > 0 {
			fmt.Fprintf(&b, " ranks=%v", e.Ranks)
		}
		if e.Proc != "" {
			fmt.Fprintf(&b, " proc=%s", e.Proc)
		}
		fmt.Fprintf(&b, " (%s)\n", e.Reason)
	}
	if s.EventsDropped > 0 {
		fmt.Fprintf(&b, "events dropped %d\n", s.EventsDropped)
	}
	for _, l := range s.Logs {
		fmt.Fprintf(&b, "log @%s %s %s: %s\n", off(l.At), l.Proc, l.Stream, l.Text)
	}
	if s.LogLines > 0 {
		fmt.Fprintf(&b, "log lines %d\n", s.LogLines)
	}
	return b.String()
}

// TestModelBounds: the model holds at most MaxStopped stopped meshes (the
// oldest stopped is forgotten, and named so that its counts go too) and
// the last jobctl.MaxEvents events, counting those it dropped.
func TestModelBounds(t *testing.T) {
	m := NewModel()
	at := time.Unix(0, 0)
	m.MeshAdded(Mesh{ID: "c.live", Name: "live", Procs: []string{"p0"}})
	for i := range MaxStopped + 1 {
		id := fmt.Sprintf("c.%d", i)
		m.MeshAdded(Mesh{ID: id, Name: id, Procs: []string{"p0"}})
		want := ""
		if i == MaxStopped {
			want = "c.0"
		}
		if forgot := m.MeshStopped(id); forgot != want {
			t.Fatalf("stop %d: forgot %q, want %q", i, forgot, want)
		}
	}
	for range jobctl.MaxEvents + 5 {
		m.Failed(at, Failure{MeshID: "c.live", Mesh: "live", Proc: "p0", Reason: "x"})
	}
	s := m.Snapshot(Live{})
	if len(s.ActorMeshes) != MaxStopped+1 || s.ActorMeshes[0].ID != "c.live" || s.ActorMeshes[1].ID != "c.1" {
		t.Errorf("%d meshes, first %s, %s; want %d, c.live, c.1", len(s.ActorMeshes), s.ActorMeshes[0].ID, s.ActorMeshes[1].ID, MaxStopped+1)
	}
	if len(s.Events) != jobctl.MaxEvents || s.EventsDropped != 5 || s.Totals.Failures != jobctl.MaxEvents+5 {
		t.Errorf("%d events, %d dropped, %d failures; want %d, 5, %d", len(s.Events), s.EventsDropped, s.Totals.Failures, jobctl.MaxEvents, jobctl.MaxEvents+5)
	}
}
