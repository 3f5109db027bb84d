package launch

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/monarch-go/monarch/internal/jobstate"
)

// How a job ended, told as what it was: the launcher records it (status
// shows it) and says it in its last line. A stop is told by who asked:
// monarch stop leaves a request beside the job's record before it
// signals (stopRequestPath), the scheduler says why it ends a job
// (scancel, a time limit, a preemption), and a signal of the launcher's
// own is named as such.

// outcome is how a job ended: text as a user reads it, and whether it was
// stopped (asked to end) rather than done or failed by itself.
type outcome struct {
	text    string
	stopped bool
}

// Reported is an error the launcher has said already, in full, with the
// job's last line: whoever gets it need not print it again.
type Reported struct{ Err error }

func (r Reported) Error() string { return r.Err.Error() }
func (r Reported) Unwrap() error { return r.Err }

// StopSignal is the cause of a launcher's context when a signal ends it
// (SIGTERM, SIGHUP): the command that runs the launcher cancels the
// context with it.
type StopSignal struct{ Signal os.Signal }

func (s StopSignal) Error() string { return "stopped by " + signalName(s.Signal) }

func signalName(sig os.Signal) string {
	switch sig {
	case syscall.SIGTERM:
		return "SIGTERM"
	case syscall.SIGHUP:
		return "SIGHUP (its terminal closed)"
	case os.Interrupt:
		return "Ctrl-C (SIGINT)"
	}
	return sig.String()
}

// stopRequestPath is the file monarch stop writes before it signals the
// job's launcher (or cancels its batch job), so the launcher can say who
// stopped it.
func stopRequestPath(dir, job string) string { return filepath.Join(dir, job+".stop") }

// requestStop leaves the stop request of job in dir.
func requestStop(dir, job string) error {
	return os.WriteFile(stopRequestPath(dir, job), []byte(time.Now().Format(time.RFC3339)+"\n"), 0o600)
}

// stopRequested reports whether monarch stop asked job to stop, and
// takes the request away.
func stopRequested(dir, job string) bool {
	err := os.Remove(stopRequestPath(dir, job))
	return err == nil
}

// schedulerEnding is what the scheduler says when it is ending the job
// this launcher runs in ("cancelled by scancel", "time limit",
// "requeued", ...), "" when it is not (or cannot say).
func schedulerEnding(ctx context.Context, p *placement) string {
	sched, id := enclosingBatch()
	if id == "" {
		return ""
	}
	b := kinds[sched].queue.state(ctx, id)
	if b.Restarts > restarts() {
		// A requeue ends the run as a scancel does (Slurm: COMPLETING,
		// no reason), but has counted the run that follows.
		if b.Cause == "preempted" {
			return "preempted and requeued"
		}
		return "requeued"
	}
	if b.Cause != "" {
		return b.Cause
	}
	if !p.jobEnd.IsZero() && time.Until(p.jobEnd) < 2*time.Second {
		return "time limit"
	}
	return ""
}

// endOf tells how the job ended, from what the client's supervision
// returned (code, stopped, err), the client's failure report f, and who
// asked it to stop.
func endOf(ctx context.Context, dir, job string, p *placement, ending string, code int, stopped bool, err error,
	f *jobstate.Failure) outcome {
	asked := stopRequested(dir, job)
	switch {
	case asked && stopped:
		return outcome{text: "stopped by monarch stop", stopped: true}
	case ending != "":
		return outcome{text: ending, stopped: true}
	case stopped && ctx.Err() == nil && err == nil:
		return outcome{text: "interrupted (Ctrl-C)", stopped: true}
	case stopped && err == nil:
		if c := schedulerEnding(context.WithoutCancel(ctx), p); c != "" {
			return outcome{text: c, stopped: true}
		}
		var sig StopSignal
		if errors.As(context.Cause(ctx), &sig) {
			return outcome{text: sig.Error(), stopped: true}
		}
		return outcome{text: "stopped", stopped: true}
	case err != nil:
		return outcome{text: "failed: " + strings.TrimPrefix(err.Error(), "launch: ")}
	case code == 0:
		return outcome{text: "done"}
	case f != nil && f.Summary != "":
		return outcome{text: "failed: " + f.Summary}
	}
	if c := schedulerEnding(context.WithoutCancel(ctx), p); c != "" {
		// Its procs or hosts went with the allocation before the
		// launcher heard why.
		return outcome{text: c, stopped: true}
	}
	return outcome{text: fmt.Sprintf("failed (exit %d)", code)}
}
