package actorrt

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/monarch-go/monarch/internal/wire"

	"github.com/cockroachdb/datadriven"
)

// TestHealthTable runs the scripts in testdata/health: events for one
// process's healthTable and the effects each gives. Times are offsets
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
// go test -run TestHealthTable -rewrite ./actorrt rewrites the expected
// effects; read the diff before keeping it.
func TestHealthTable(t *testing.T) {
	datadriven.Walk(t, "testdata/health", func(t *testing.T, path string) {
		var ht *healthTable
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
			var effects []any
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
				ht = newHealthTable(self, to, la)
				return ""
			case "started":
				var procs []procInfo
				for _, line := range strings.Split(strings.TrimSpace(d.Input), "\n") {
					f := strings.Fields(line)
					if len(f) != 2 && len(f) != 3 {
						d.Fatalf(t, "want <proc> <agent> [host]: %q", line)
					}
					p := procInfo{ID: f[0], Agent: f[1]}
					if len(f) == 3 {
						p.Host = f[2]
					}
					procs = append(procs, p)
				}
				effects = ht.step(evStarted{procs: procs, fresh: d.HasArg("fresh"), at: at(d)})
			case "gone":
				var n wire.GoneNotice
				d.ScanArgs(t, "proc", &n.Proc)
				d.ScanArgs(t, "reason", &n.Reason)
				n.Stopped = d.HasArg("stopped")
				effects = ht.step(evGone{n: n, announce: d.HasArg("announce")})
			case "heard":
				var agent string
				d.ScanArgs(t, "agent", &agent)
				effects = ht.step(evHeard{agent: agent, at: at(d)})
			case "link":
				var agent, cause string
				d.ScanArgs(t, "agent", &agent)
				if d.HasArg("cause") {
					d.ScanArgs(t, "cause", &cause)
				}
				effects = ht.step(evLink{agent: agent, up: d.HasArg("up"), cause: cause, at: at(d)})
			case "tick":
				effects = ht.step(evTick{at: at(d), starved: d.HasArg("starved")})
			case "query":
				var proc string
				d.ScanArgs(t, "proc", &proc)
				n, ok := ht.notice(proc)
				if !ok {
					return fmt.Sprintf("%s: not gone (%d gone)\n", proc, ht.numGone())
				}
				return fmt.Sprintf("%s: gone: %s (%d gone)\n", proc, describeGone(n), ht.numGone())
			default:
				d.Fatalf(t, "unknown command %s", d.Cmd)
			}
			var b strings.Builder
			for _, e := range effects {
				switch e := e.(type) {
				case effGone:
					fmt.Fprintf(&b, "gone %s: %s", e.n.Proc, describeGone(e.n))
					if e.announce {
						fmt.Fprintf(&b, " (announce to the holders of %s's procs)", e.agent)
					}
					b.WriteString("\n")
				case effWatch:
					fmt.Fprintf(&b, "watch %s\n", e.agent)
				case effSuspect:
					fmt.Fprintf(&b, "suspect %s: silent for %v\n", e.agent, e.silent)
				case effCleared:
					fmt.Fprintf(&b, "cleared %s: heard after %v\n", e.agent, e.silent)
				case effAsk:
					fmt.Fprintf(&b, "ask %s which ended of %s\n", e.agent, strings.Join(e.procs, ","))
				default:
					fmt.Fprintf(&b, "? %T\n", e)
				}
			}
			return b.String()
		})
	})
}

func describeGone(n wire.GoneNotice) string {
	if n.Stopped {
		return n.Reason + " [stopped]"
	}
	return n.Reason
}
