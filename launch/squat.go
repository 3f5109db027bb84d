package launch

import (
	"fmt"

	"github.com/monarch-go/monarch/internal/jobstate"
	"github.com/monarch-go/monarch/logagg"
)

// stepAround keeps a default folder another user squatted from stopping
// the job: the system logs' (logagg.UseSystemLogDir) and, when the job's
// records go to the default state dir, that one. A fresh private folder
// takes its place, set in this process's environment so that the job's
// processes started from here (client, local agents, the run a detached
// submit or salloc starts) use the same, and said once on cfg.Progress.
// defaultState says cfg.StateDir is the default, not one the caller chose.
func stepAround(cfg *RunConfig, defaultState bool) error {
	if _, err := logagg.UseSystemLogDir(cfg.Progress); err != nil {
		// No file for the system logs: they go to stderr alone.
		fmt.Fprintf(cfg.Progress, "monarch: no system log: %v\n", err)
	}
	if !defaultState {
		return nil
	}
	dir, err := jobstate.StepAround(cfg.StateDir, cfg.Progress)
	if err != nil {
		return fmt.Errorf("launch: %w", err)
	}
	cfg.StateDir = dir
	return nil
}
