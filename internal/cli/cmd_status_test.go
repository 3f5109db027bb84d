package cli

import (
	"testing"

	"github.com/monarch-go/monarch/internal/jobstate"
	"github.com/monarch-go/monarch/launch"
)

// TestSPMDRestartsStateText: monarch status shows a running SPMD job's
// last restart of how many, and an ended one's count.
func TestSPMDRestartsStateText(t *testing.T) {
	rs := []jobstate.SPMDRestart{{Restart: 1, MaxRestarts: 3}, {Restart: 2, MaxRestarts: 3}}
	for _, tt := range []struct {
		rec  launch.JobState
		want string
	}{
		{launch.JobState{State: launch.StateRunning, SPMDRestarts: rs[:1]}, "running (restart 1 of 3)"},
		{launch.JobState{State: launch.StateRunning, SPMDRestarts: rs}, "running (restart 2 of 3)"},
		{launch.JobState{State: launch.StateDone, End: "done", SPMDRestarts: rs[:1]}, "done (1 restart)"},
		{launch.JobState{State: launch.StateFailed, Exit: 1, End: "failed: rank 1 on h0 exited with status 1", SPMDRestarts: rs},
			"failed: rank 1 on h0 exited with status 1 (exit 1) (2 restarts)"},
		{launch.JobState{State: launch.StateDone, End: "done"}, "done"},
	} {
		if got := stateText(&tt.rec); got != tt.want {
			t.Errorf("stateText = %q, want %q", got, tt.want)
		}
	}
}
