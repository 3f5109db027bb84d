package launch

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/monarch-go/monarch/internal/jobenv"
)

// TestSrunTaskEndAlone: srun's line for one task of the agents' step
// reports that host's agent alone, with its host's cause (read from the
// lines that came after the task's end too); the step's own end then
// holds only the agents not reported. Lines are srun 22.05's own.
func TestSrunTaskEndAlone(t *testing.T) {
	hosts := []string{"h1", "h2", "h3"}
	a := newAgents(len(hosts) + 1)
	log := &stepLog{from: "srun", own: srunOwn}
	why := causeContext{hosts: hosts, monarch: "/opt/monarch", key: "[slurm] monarch", keySet: true}
	tasks := a.followTasks(hosts, log, why.readSrun)
	fmt.Fprint(log, "slurmstepd-h1: error: execve(): /opt/other: No such file or directory\n")
	fmt.Fprint(log, "srun: error: h2: task 1: Killed\n")
	fmt.Fprint(log, "monarch agent on h2: lost its link\n") // after the task's end, within taskSettle
	var e agentEnd
	select {
	case e = <-a.ended:
	case <-time.After(30 * time.Second):
		t.Fatal("no end reported 30s after srun's line for h2's task")
	}
	if !slices.Equal(e.agents, []string{jobenv.AgentID(1)}) {
		t.Errorf("end of %v; want h2's agent %s alone", e.agents, jobenv.AgentID(1))
	}
	if want := "srun task on h2 ended; its agent said: lost its link"; e.String() != want {
		t.Errorf("end %q; want %q", e.String(), want)
	}
	for _, l := range e.lines {
		if !strings.Contains(l, "h2") {
			t.Errorf("h2's end shows %q, a line of another host's", l)
		}
	}
	fmt.Fprint(log, "srun: error: h2: task 1: Killed\n") // said again: reported once
	if rest := tasks.rest(); !slices.Equal(rest, []string{jobenv.AgentID(0), jobenv.AgentID(2)}) {
		t.Errorf("the step's end holds %v; want the agents of h1 and h3", rest)
	}
	if rest := tasks.rest(); len(rest) != 0 {
		t.Errorf("a second end of the step holds %v; want none", rest)
	}
	time.Sleep(2 * taskSettle) // the repeated line's report, had it been made
	if len(a.ended) != 0 {
		t.Errorf("%d more ends reported; want none", len(a.ended))
	}
}

// FuzzSrunTaskLine: whatever srun (or a line that looks like its) says,
// reading it neither panics nor reports a host that is not the step's,
// and each host at most once.
func FuzzSrunTaskLine(f *testing.F) {
	for _, s := range []string{
		"srun: error: h2: task 1: Killed",
		"srun: error: h1: task 0: Exited with exit code 2",
		"srun: error: h[1-2]: tasks 0-1: Killed",
		"srun: error: h[0-999999]: task 1: Killed",
		"srun: error: h2: tasks 1,3: Terminated",
		"srun: error: : task : ",
		"srun: error: Node failure on h2",
	} {
		f.Add(s)
	}
	hosts := []string{"h1", "h2"}
	f.Fuzz(func(t *testing.T, line string) {
		a := newAgents(len(hosts) + 1)
		tasks := a.followTasks(hosts, &stepLog{from: "srun", own: srunOwn}, causeContext{hosts: hosts}.readSrun)
		tasks.line(line)
		tasks.line(line)
		tasks.mu.Lock()
		n := 0
		for _, s := range tasks.seen {
			if s {
				n++
			}
		}
		tasks.mu.Unlock()
		if m := reTaskEnd.FindStringSubmatch(line); n > 1 || (n == 1 && (m == nil || !slices.Contains(hosts, m[1]))) {
			t.Errorf("%q: %d hosts' ends read; want h1's or h2's, named", line, n)
		}
	})
}
