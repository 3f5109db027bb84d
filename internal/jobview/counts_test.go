package jobview

import (
	"fmt"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
)

// TestCounts runs the scripts in testdata/counts: procs' announcements
// and ends into Counts, and each change it reports. Commands:
//
//	up                      announcements, one a line: "<proc> <host>" (as on the wire)
//	c-1 node0
//	gone proc=c-1           a proc's end
//	hosts-not-procs ids=(c-1,c-2)  these procs serve as simulated hosts
//	hostof proc=c-1         where it runs or ran
//
// go test -run TestCounts -rewrite ./internal/jobview rewrites the
// expected output; read the diff before keeping it.
func TestCounts(t *testing.T) {
	datadriven.Walk(t, "testdata/counts", func(t *testing.T, path string) {
		var out strings.Builder
		c := NewCounts(func(n CountsNow) {
			fmt.Fprintf(&out, "hosts=%d procs=%d ever hosts=%d procs=%d\n", n.Hosts, n.Procs, n.EverHosts, n.EverProcs)
		})
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			out.Reset()
			switch d.Cmd {
			case "up":
				for _, line := range strings.Split(d.Input, "\n") {
					c.Up([]byte(line)) // untrimmed: " node2" names no proc
				}
			case "gone":
				var proc string
				d.ScanArgs(t, "proc", &proc)
				c.Gone(proc)
			case "hosts-not-procs":
				var ids []string
				d.ScanArgs(t, "ids", &ids)
				c.HostsNotProcs(ids)
			case "hostof":
				var proc string
				d.ScanArgs(t, "proc", &proc)
				return fmt.Sprintf("%q\n", c.HostOf(proc))
			default:
				d.Fatalf(t, "unknown command %s", d.Cmd)
			}
			return out.String()
		})
	})
}
