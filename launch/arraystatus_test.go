package launch

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/monarch-go/monarch/internal/arrayspec"
)

func TestTaskRef(t *testing.T) {
	tests := []struct {
		ref   string
		array string
		index int
		ok    bool
	}{
		{"j1abc:3", "j1abc", 3, true},
		{"j1abc_3", "j1abc", 3, true},
		{"8_12", "8", 12, true},
		{"pre_fix_j1_0", "pre_fix_j1", 0, true},
		{"j1abc", "", 0, false},
		{"j1abc:", "", 0, false},
		{":3", "", 0, false},
		{"j1:x", "", 0, false},
		{"j1:-1", "", 0, false},
		{"j1:1001", "", 0, false}, // past MaxArraySize
		{"j1:99999999999999999999", "", 0, false},
	}
	for _, tt := range tests {
		array, index, ok := taskRef(tt.ref)
		if array != tt.array || index != tt.index || ok != tt.ok {
			t.Errorf("taskRef(%q) = %q, %d, %v; want %q, %d, %v", tt.ref, array, index, ok, tt.array, tt.index, tt.ok)
		}
	}
}

func FuzzTaskRef(f *testing.F) {
	for _, s := range []string{"j1:3", "8_12", "a_b:0", ":", "_", "j1:0003", "j1:99999999999999999999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, ref string) {
		array, i, ok := taskRef(ref)
		if !ok {
			return
		}
		if array == "" || i < 0 || i >= arrayspec.MaxArraySize || !strings.HasPrefix(ref, array) {
			t.Fatalf("taskRef(%q) = %q, %d", ref, array, i)
		}
	})
}

// scontrol -o show job ARRAYID of Slurm 22.05: a line per task that has
// run or runs, one for the tasks still pending together.
const scontrolArray = `JobId=41 ArrayJobId=40 ArrayTaskId=0 JobName=job UserId=root(0) JobState=COMPLETED Reason=None ExitCode=0:0 Restarts=0
JobId=42 ArrayJobId=40 ArrayTaskId=1 JobName=job UserId=root(0) JobState=FAILED Reason=NonZeroExitCode ExitCode=1:0 Restarts=0
JobId=43 ArrayJobId=40 ArrayTaskId=2 JobName=job UserId=root(0) JobState=RUNNING Reason=None ExitCode=0:0 Restarts=0
JobId=40 ArrayJobId=40 ArrayTaskId=3-5,7%2 ArrayTaskThrottle=2 JobName=job JobState=PENDING Reason=JobArrayTaskLimit Restarts=0
`

func TestParseSlurmArray(t *testing.T) {
	got := parseSlurmArray(scontrolArray)
	want := map[int]string{0: "finished", 1: "finished", 2: "running", 3: "pending", 4: "pending", 5: "pending", 7: "pending"}
	if len(got) != len(want) {
		t.Fatalf("parseSlurmArray: %v, want %v", got, want)
	}
	for i, st := range want {
		if got[i].State != st {
			t.Errorf("task %d: %+v, want %s", i, got[i], st)
		}
	}
	if got[1].Cause != "failed (Slurm: FAILED)" || got[3].Reason != "JobArrayTaskLimit" {
		t.Errorf("task 1: %+v; task 3: %+v", got[1], got[3])
	}
	if got := parseSlurmArray("JobId=9 JobState=RUNNING\n"); len(got) != 0 {
		t.Errorf("a job that is no array: %v", got)
	}
}

func FuzzParseSlurmArray(f *testing.F) {
	for _, s := range []string{scontrolArray, "ArrayTaskId=0-1000%1 JobState=PENDING", "ArrayTaskId=1001", "ArrayTaskId=-1", "ArrayTaskId=3 ArrayTaskId=x", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, out string) {
		for i, b := range parseSlurmArray(out) {
			if i < 0 || i >= arrayspec.MaxArraySize || b.Restarts < 0 {
				t.Fatalf("parseSlurmArray(%q): task %d: %+v", out, i, b)
			}
		}
	})
}

func TestArraySummary(t *testing.T) {
	tasks := []*JobState{
		{ArrayIndex: 0, State: StateDone}, {ArrayIndex: 1, State: StateFailed}, {ArrayIndex: 2, State: StateRunning},
		{ArrayIndex: 3, State: StatePending}, {ArrayIndex: 4, State: StateSubmitted}, {ArrayIndex: 5, State: StateStopped},
		{ArrayIndex: 6, State: StateLost}, {ArrayIndex: 7, State: StateFailed},
	}
	want := "8 tasks: 2 pending, 1 running, 1 done, 2 failed (1,7), 1 stopped, 1 lost"
	if got := ArraySummary(tasks); got != want {
		t.Errorf("ArraySummary = %q, want %q", got, want)
	}
	state, code := arrayEnd(tasks[:2], nil)
	if state != StateFailed || code != 1 {
		t.Errorf("arrayEnd of a done and a failed task: %s %d", state, code)
	}
	if state, code := arrayEnd(tasks[:1], nil); state != StateDone || code != 0 {
		t.Errorf("arrayEnd of a done task: %s %d", state, code)
	}
	stopped := []*JobState{{State: StateDone}, {State: StateStopped}}
	if state, code := arrayEnd(stopped, StopSignal{Signal: os.Interrupt}); state != StateStopped || code != 130 {
		t.Errorf("arrayEnd of an array stopped by Ctrl-C: %s %d, want stopped 130", state, code)
	}
	if state, code := arrayEnd(stopped, context.Canceled); state != StateStopped || code != 143 {
		t.Errorf("arrayEnd of an array stopped otherwise: %s %d, want stopped 143", state, code)
	}
}
