package launch

import (
	"fmt"
	"strings"
	"testing"

	"github.com/monarch-go/monarch/internal/jobstate"
)

func TestParseAfter(t *testing.T) {
	deps, err := ParseAfter(nil, jobstate.AfterOK, []string{"j1,j2", " 8 ", "j1"})
	if err != nil {
		t.Fatal(err)
	}
	deps, err = ParseAfter(deps, jobstate.AfterAny, []string{"j1"})
	if err != nil {
		t.Fatal(err)
	}
	if got := AfterText(deps); got != "after ok j1, after ok j2, after ok 8, after any j1" {
		t.Errorf("AfterText = %q", got)
	}
	if got := strings.Join(afterArgs(deps), " "); got != "--after-ok=j1 --after-ok=j2 --after-ok=8 --after-any=j1" {
		t.Errorf("afterArgs = %q", got)
	}
	for _, tt := range []struct{ kind, value, want string }{
		{jobstate.AfterOK, "j1,,j2", `--after-ok "j1,,j2": an empty job id`},
		{jobstate.AfterStart, "", `--after "": an empty job id`},
		{jobstate.AfterAny, "j1.3", `--after-any "j1.3": want a job's id`},
		{jobstate.AfterAny, "j1 j2", `--after-any "j1 j2": want a job's id`},
		{jobstate.AfterAny, "../x", `--after-any "../x": want a job's id`},
		{jobstate.AfterAny, strings.Repeat("a", 65), `want a job's id`},
		{"afterburstbuffer", "j1", `no dependency kind "afterburstbuffer"`},
	} {
		if _, err := ParseAfter(nil, tt.kind, []string{tt.value}); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("ParseAfter(%s, %q) = %v, want %q", tt.kind, tt.value, err, tt.want)
		}
	}
	many := make([]string, maxAfter+1)
	for i := range many {
		many[i] = fmt.Sprintf("j%d", i)
	}
	if _, err := ParseAfter(nil, jobstate.AfterOK, []string{strings.Join(many, ",")}); err == nil || !strings.Contains(err.Error(), "at most 64") {
		t.Errorf("%d jobs: %v", len(many), err)
	}
}

// FuzzParseAfter: whatever the flag's value, the jobs read are ids that
// are safe in a file name and a command line (Find then resolves them to
// records' ids), and nothing panics.
func FuzzParseAfter(f *testing.F) {
	for _, s := range []string{"j1", "j1,j2", "8", "j1,,", " , ", "a.b", "j1:3", "x\x00y", "../../etc"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		deps, err := ParseAfter(nil, jobstate.AfterOK, []string{v})
		if err != nil {
			return
		}
		for _, d := range deps {
			if d.Job == "" || len(d.Job) > 64 || strings.ContainsAny(d.Job, "./,*= \x00") {
				t.Fatalf("ParseAfter(%q) gave job %q", v, d.Job)
			}
		}
	})
}

func TestAfterState(t *testing.T) {
	jobs := []*JobState{
		{Job: "run", State: StateRunning},
		{Job: "wait", State: StatePending},
		{Job: "sub", State: StateSubmitted, BatchState: "pending (Resources)"},
		{Job: "ok", State: StateDone},
		{Job: "bad", State: StateFailed, Exit: 3, End: "failed (exit 3)"},
		{Job: "stopped", State: StateStopped, End: "stopped by monarch stop before it ran"},
		{Job: "lost", State: StateLost},
		// An array, two tasks done, one running.
		{Job: "arr", State: StateRunning, Array: "0-2"},
		{Job: "arr_0", State: StateDone, ArrayJob: "arr"},
		{Job: "arr_1", State: StateDone, ArrayJob: "arr", ArrayIndex: 1},
		{Job: "arr_2", State: StateRunning, ArrayJob: "arr", ArrayIndex: 2},
		// An array with a failed task.
		{Job: "farr", State: StateFailed, Array: "0-1"},
		{Job: "farr_0", State: StateDone, ArrayJob: "farr"},
		{Job: "farr_1", State: StateFailed, Exit: 1, End: "failed: rank 0 exited with status 1", ArrayJob: "farr", ArrayIndex: 1},
		{Job: "darr", State: StateDone, Array: "0-1"},
		{Job: "darr_0", State: StateDone, ArrayJob: "darr"},
		{Job: "darr_1", State: StateDone, ArrayJob: "darr", ArrayIndex: 1},
	}
	for _, tt := range []struct {
		kind, job string
		met       bool
		never     string
	}{
		{jobstate.AfterStart, "run", true, ""},
		{jobstate.AfterStart, "wait", false, ""},
		{jobstate.AfterStart, "sub", false, ""},
		{jobstate.AfterStart, "stopped", true, ""}, // ended without starting
		{jobstate.AfterOK, "run", false, ""},
		{jobstate.AfterOK, "ok", true, ""},
		{jobstate.AfterOK, "bad", false, "job bad failed (exit 3)"},
		{jobstate.AfterOK, "stopped", false, "job stopped was stopped (stopped by monarch stop before it ran)"},
		{jobstate.AfterOK, "lost", false, "job lost was lost (its launcher is gone)"},
		{jobstate.AfterAny, "run", false, ""},
		{jobstate.AfterAny, "bad", true, ""},
		{jobstate.AfterAny, "lost", true, ""},
		{jobstate.AfterOK, "gone", false, "job gone is no longer in the job store (monarch clean), so it cannot be known to have succeeded"},
		{jobstate.AfterAny, "gone", true, ""}, // clean removes only ended jobs
		{jobstate.AfterStart, "gone", true, ""},
		{jobstate.AfterStart, "arr", true, ""},
		{jobstate.AfterOK, "arr", false, ""},
		{jobstate.AfterAny, "arr", false, ""},
		{jobstate.AfterOK, "farr", false, "task 1 of array farr: job farr_1 failed: rank 0 exited with status 1"},
		{jobstate.AfterAny, "farr", true, ""},
		{jobstate.AfterOK, "darr", true, ""},
		{jobstate.AfterOK, "arr_1", true, ""}, // one task
	} {
		met, never := afterState(Dependency{Kind: tt.kind, Job: tt.job}, jobs)
		if met != tt.met || never != tt.never {
			t.Errorf("afterState(%s %s) = %v, %q; want %v, %q", tt.kind, tt.job, met, never, tt.met, tt.never)
		}
	}
}

func TestQueueDependency(t *testing.T) {
	slurm := kinds["slurm"]
	jobs := []*JobState{
		{Job: "a", State: StateSubmitted, Batch: "slurm", BatchID: "11"},
		{Job: "b", State: StateRunning, Batch: "slurm", BatchID: "12", Scheduler: "slurm"},
		{Job: "c", State: StateDone, Batch: "slurm", BatchID: "9"}, // met: Slurm may have forgotten it
		{Job: "l", State: StateRunning, Scheduler: "local"},
	}
	deps := []Dependency{{Kind: jobstate.AfterOK, Job: "a"}, {Kind: jobstate.AfterAny, Job: "b"}, {Kind: jobstate.AfterOK, Job: "b"}, {Kind: jobstate.AfterOK, Job: "c"}}
	if got, err := queueDependency(slurm, deps, jobs); err != nil || got != "afterok:11:12,afterany:12" {
		t.Errorf("queueDependency = %q, %v", got, err)
	}
	_, err := queueDependency(slurm, []Dependency{{Kind: jobstate.AfterOK, Job: "l"}}, jobs)
	if err == nil || !strings.Contains(err.Error(), "--after-ok l: the job runs with local, never in Slurm's queue, so Slurm cannot wait for it") {
		t.Errorf("a local dependency: %v", err)
	}
}
