package liveness

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/monarch-go/monarch/internal/wire"

	"github.com/cockroachdb/datadriven"
)

// TestTable runs the scripts in testdata: events for one
// process's Table and the effects each gives. Times are offsets
// from the start of the script. Commands:
//
//	table self=c timeout=5s lost=30s a new table (every script starts with one)
//	started at=1s [fresh]            procs started, one per input line: "<proc> <agent> [host]";
//	                                 fresh: being spawned here now (none can have ended)
//	c-1 h0
//	gone proc=c-1 reason=crashed [stopped] [announce]
//	heard agent=h0 at=2s             a heartbeat
//	link agent=h0 up|down [cause=reset] at=3s  the job's link watcher's word on h0's link
//	tick at=7s [starved]             time passes (starved: this process was starved since the last tick)
//	query proc=c-1                   what the table knows of a proc
//
// go test -run TestTable -rewrite ./actorrt/internal/liveness rewrites the expected
// effects; read the diff before keeping it.
func TestTable(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		var ht *Table
		epoch := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		at := func(d *datadriven.TestData) time.Time {
			var s string
			d.ScanArgs(t, "at", &s)
			off, err := time.ParseDuration(s)
			if err != nil {
				d.Fatalf(t, "at=%s: %v", s, err)
			}
			return epoch.Add(off)
		}
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			if d.Cmd != "table" && ht == nil {
				d.Fatalf(t, "start the script with: table self=ID timeout=D")
			}
			var effects []Effect
			switch d.Cmd {
			case "table":
				var self, timeout, lost string
				d.ScanArgs(t, "self", &self)
				d.ScanArgs(t, "timeout", &timeout)
				d.ScanArgs(t, "lost", &lost)
				to, err := time.ParseDuration(timeout)
				if err != nil {
					d.Fatalf(t, "timeout: %v", err)
				}
				la, err := time.ParseDuration(lost)
				if err != nil {
					d.Fatalf(t, "lost: %v", err)
				}
				ht = NewTable(self, to, la)
				return ""
			case "started":
				var procs []Proc
				for _, line := range strings.Split(strings.TrimSpace(d.Input), "\n") {
					f := strings.Fields(line)
					if len(f) != 2 && len(f) != 3 {
						d.Fatalf(t, "want <proc> <agent> [host]: %q", line)
					}
					p := Proc{ID: f[0], Agent: f[1]}
					if len(f) == 3 {
						p.Host = f[2]
					}
					procs = append(procs, p)
				}
				effects = ht.Started(procs, d.HasArg("fresh"), at(d))
			case "gone":
				var n wire.GoneNotice
				d.ScanArgs(t, "proc", &n.Proc)
				d.ScanArgs(t, "reason", &n.Reason)
				n.Stopped = d.HasArg("stopped")
				effects = ht.ProcGone(n, d.HasArg("announce"))
			case "heard":
				var agent string
				d.ScanArgs(t, "agent", &agent)
				effects = ht.Heard(agent, at(d))
			case "link":
				var agent, cause string
				d.ScanArgs(t, "agent", &agent)
				if d.HasArg("cause") {
					d.ScanArgs(t, "cause", &cause)
				}
				effects = ht.LinkChanged(agent, d.HasArg("up"), cause, at(d))
			case "tick":
				effects = ht.Tick(at(d), d.HasArg("starved"))
			case "query":
				var proc string
				d.ScanArgs(t, "proc", &proc)
				n, ok := ht.Notice(proc)
				if !ok {
					return fmt.Sprintf("%s: not gone (%d gone)\n", proc, ht.NumGone())
				}
				return fmt.Sprintf("%s: gone: %s (%d gone)\n", proc, describeGone(n), ht.NumGone())
			default:
				d.Fatalf(t, "unknown command %s", d.Cmd)
			}
			var p healthPrinter
			for _, e := range effects {
				e.ApplyTo(&p)
			}
			return p.String()
		})
	})
}

// healthPrinter writes a Table's effects, one a line.
type healthPrinter struct{ strings.Builder }

func (p *healthPrinter) Gone(e Gone) {
	fmt.Fprintf(p, "gone %s: %s", e.Notice.Proc, describeGone(e.Notice))
	if e.Announce {
		fmt.Fprintf(p, " (announce to the holders of %s's procs)", e.Agent)
	}
	p.WriteString("\n")
}
func (p *healthPrinter) Watch(e Watch) { fmt.Fprintf(p, "watch %s\n", e.Agent) }
func (p *healthPrinter) Ask(e Ask) {
	fmt.Fprintf(p, "ask %s which ended of %s\n", e.Agent, strings.Join(e.Procs, ","))
}
func (p *healthPrinter) Suspect(e Suspect) {
	fmt.Fprintf(p, "suspect %s: silent for %v\n", e.Agent, e.Silent)
}
func (p *healthPrinter) Cleared(e Cleared) {
	fmt.Fprintf(p, "cleared %s: heard after %v\n", e.Agent, e.Silent)
}

func describeGone(n wire.GoneNotice) string {
	if n.Stopped {
		return n.Reason + " [stopped]"
	}
	return n.Reason
}
