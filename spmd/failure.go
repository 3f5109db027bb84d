package spmd

import (
	"fmt"
	"strings"
	"syscall"
	"time"

	"github.com/monarch-go/monarch/actorrt"
)

// failureOf is what the job's client reports of a rank that failed: its
// rank, host, status or signal, and the last lines it wrote to stderr;
// and how it ended ("exited with status 1").
func failureOf(e actorrt.ProcEnd, tail []string) (*actorrt.Failure, string) {
	// The agent's reason names the host too: "exited with status 1
	// (host h2)". The summary names it once.
	how := strings.TrimSuffix(e.Reason, " (host "+e.Host+")")
	f := &actorrt.Failure{
		Summary: fmt.Sprintf("rank %d on %s %s", e.Point.Rank(), e.Host, how),
		Mesh:    MeshName, Rank: e.Point.Rank(), Host: e.Host, Exit: e.Status, Tail: tail,
	}
	if sig, ok := strings.CutPrefix(how, killedBy); ok {
		f.Signal = sig
	}
	return f, how
}

// firstFailure is the failure, of those heard (in the order heard;
// heard[0] stopped the others), that happened first by failedAt: the
// time of its error, when its agent read it, for a rank whose last words
// are its error, or else the time its host saw it end.
//
// Two ranks' ends may be heard out of the order they happened in (one
// agent's notice waits for its proc's output to drain, a loaded machine
// runs one agent late), and they may even happen out of order: a rank
// that raises prints its traceback, then closes its connections as its
// interpreter winds down, and its peers in a collective, failing at once
// (the connection closed), may end before it does (seen in 3 of 30 runs
// of a 4-rank PyTorch job whose rank 1 raises, on a loaded machine: a
// peer ended 40 to 70 ms before rank 1). Their tracebacks still come
// after rank 1's: that is what torchrun orders by too (the time in each
// rank's error file).
//
// Times from the same host compare exactly; times from two hosts compare
// as well as their clocks agree: NTP (which Slurm clusters run) keeps
// them within a few milliseconds, far less than a rank takes to fail
// after its peer; with more skew than that, the rank on the host whose
// clock runs behind may be reported although it failed second. An end
// whose time nobody knows (its host was lost) cannot be placed: heard
// first, it is the one reported; heard later, it is not preferred to one
// whose time is known. Ties keep the order heard.
func firstFailure(heard []actorrt.ProcEnd) actorrt.ProcEnd {
	first := heard[0]
	if first.At.IsZero() {
		return first
	}
	for _, e := range heard[1:] {
		if !e.At.IsZero() && failedAt(e).Before(failedAt(first)) {
			first = e
		}
	}
	return first
}

// lastWords bounds how long before its end a rank's last stderr line
// may have been written to be taken for its error: a traceback comes
// moments before its interpreter ends; a line older than that is an
// earlier message (a warning as it started), not why it ended.
const lastWords = 2 * time.Second

// failedAt is when e failed: when its last stderr line was read (ErrAt),
// if it wrote one at most lastWords before its end, ended by exiting on
// its own (a program's error, then its exit); else when it ended. A rank
// stopped, or killed by a signal (a crash, the OOM killer), did not end
// on its last words: its end is when it failed.
func failedAt(e actorrt.ProcEnd) time.Time {
	if e.ErrAt.IsZero() || e.Stopped || strings.HasPrefix(e.Reason, killedBy) || e.At.Sub(e.ErrAt) > lastWords {
		return e.At
	}
	return e.ErrAt
}

// killedBy begins the reason of a proc a signal ended: "killed by
// SIGKILL (host h2)".
const killedBy = "killed by "

// signals are the notice signals by their names in a job file.
var signals = map[string]syscall.Signal{"USR1": syscall.SIGUSR1, "USR2": syscall.SIGUSR2, "TERM": syscall.SIGTERM,
	"INT": syscall.SIGINT, "HUP": syscall.SIGHUP, "none": 0}

// ParseSignal reads a notice signal as [spmd] notice_signal names it:
// USR1, USR2, TERM, INT, HUP, or none (0).
func ParseSignal(name string) (syscall.Signal, error) {
	sig, ok := signals[name]
	if !ok {
		return 0, fmt.Errorf("spmd: notice signal %q: want USR1, USR2, TERM, INT, HUP or none", name)
	}
	return sig, nil
}

// signalName is sig as a user reads it: SIGUSR1.
func signalName(sig syscall.Signal) string {
	for name, s := range signals {
		if s == sig && s != 0 {
			return "SIG" + name
		}
	}
	return sig.String()
}
