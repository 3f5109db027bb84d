package launch

import (
	"testing"
)

// The lines of `scontrol -o show job` (cut to the fields read) as Slurm
// 22.05 printed them on the test cluster, for a job being ended and
// ended by each cause.
func TestParseSlurmJob(t *testing.T) {
	tests := []struct {
		line string
		want batchState
	}{
		{"JobId=3 JobState=PENDING Reason=Resources PreemptTime=None", batchState{State: "pending", Reason: "Resources"}},
		{"JobId=3 JobState=RUNNING Reason=None PreemptTime=None", batchState{State: "running"}},
		// What the job's own launcher sees on its SIGTERM.
		{"JobId=6 JobState=COMPLETING Reason=None PreemptTime=None", batchState{State: "completing", Cause: "cancelled by scancel"}},
		{"JobId=6 JobState=COMPLETING Reason=TimeLimit PreemptTime=None", batchState{State: "completing", Reason: "TimeLimit", Cause: "time limit"}},
		{"JobId=4 JobState=COMPLETING Reason=None PreemptEligibleTime=2026-12-03T23:33:14 PreemptTime=2026-12-03T23:33:17",
			batchState{State: "completing", Cause: "preempted"}},
		// A requeue: as a scancel, but the run that follows is counted.
		{"JobId=6 JobState=COMPLETING Reason=None PreemptTime=None Restarts=1", batchState{State: "completing", Cause: "cancelled by scancel", Restarts: 1}},
		{"JobId=6 JobState=PENDING Reason=BeginTime Restarts=2 PreemptTime=None", batchState{State: "pending", Reason: "BeginTime", Restarts: 2}},
		{"JobId=6 JobState=RUNNING Reason=None Restarts=-3 PreemptTime=None", batchState{State: "running"}},
		{"JobId=6 JobState=COMPLETING Reason=NonZeroExitCode PreemptTime=None", batchState{State: "completing", Reason: "NonZeroExitCode"}},
		// After, for MinJobAge.
		{"JobId=6 JobState=CANCELLED Reason=None PreemptTime=None", batchState{State: "finished", Cause: "cancelled by scancel"}},
		{"JobId=6 JobState=TIMEOUT Reason=TimeLimit PreemptTime=None", batchState{State: "finished", Reason: "TimeLimit", Cause: "time limit"}},
		{"JobId=4 JobState=PREEMPTED Reason=None PreemptTime=2026-12-03T23:33:17", batchState{State: "finished", Cause: "preempted"}},
		{"JobId=5 JobState=COMPLETED Reason=None PreemptTime=None", batchState{State: "finished"}},
		// Waiting for another job, and ended by --kill-on-invalid-dep
		// when that one failed.
		{"JobId=8 JobState=PENDING Reason=Dependency Dependency=afterok:7(unfulfilled) PreemptTime=None", batchState{State: "pending", Reason: "Dependency"}},
		{"JobId=8 JobState=CANCELLED Reason=DependencyNeverSatisfied Dependency=afterok:7(failed) PreemptTime=None",
			batchState{State: "finished", Reason: "DependencyNeverSatisfied", Cause: "dependency never satisfied"}},
		{"", batchState{}},
	}
	for _, tt := range tests {
		if got := parseSlurmJob(tt.line); got != tt.want {
			t.Errorf("parseSlurmJob(%q) = %+v, want %+v", tt.line, got, tt.want)
		}
	}
}

// FuzzParseSlurmJob: whatever scontrol prints, the restarts read from it
// are never negative, and nothing panics.
func FuzzParseSlurmJob(f *testing.F) {
	for _, s := range []string{
		"JobId=6 JobState=COMPLETING Reason=None PreemptTime=None Restarts=1",
		"JobId=6 JobState=PENDING Reason=BeginTime Restarts=99999999999999999999",
		"Restarts=-1 JobState=REQUEUED", "JobState= Reason=", "",
		"JobId=8 JobState=PENDING Reason=Dependency Dependency=afterok:7(unfulfilled)",
		"JobId=8 JobState=CANCELLED Reason=DependencyNeverSatisfied Dependency=afterok:7_*(failed)",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		b := parseSlurmJob(line)
		if b.Restarts < 0 {
			t.Fatalf("parseSlurmJob(%q) = %+v", line, b)
		}
	})
}
