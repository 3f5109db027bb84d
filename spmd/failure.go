package spmd

import (
	"fmt"
	"strings"
	"syscall"

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
	if sig, ok := strings.CutPrefix(how, "killed by "); ok {
		f.Signal = sig
	}
	return f, how
}

// firstFailure is the failure, of those heard (in the order heard;
// heard[0] stopped the others), that happened first: the earliest by the
// time its host saw it end. Two ranks' ends may be heard out of the
// order they happened in (one agent's notice waits for its proc's output
// to drain, a loaded machine runs one agent late): a rank that failed
// because another did (its peer in a collective went away) is then
// heard first. Times from the same host compare exactly; times from two
// hosts compare as well as their clocks agree: NTP (which Slurm clusters
// run) keeps them within a few milliseconds, far less than a rank takes
// to fail after its peer; with more skew than that, the rank on the host
// whose clock runs behind may be reported although it failed second. An
// end whose time nobody knows (its host was lost) cannot be placed: heard
// first, it is the one reported; heard later, it is not preferred to one
// whose time is known. Ties keep the order heard.
//
// What no end time tells is a failure whose end comes after the ends it
// caused: a rank that raises closes its connections while its
// interpreter winds down, and its peers, failing at once, may end before
// it does (seen in 3 of 30 runs of a 4-rank PyTorch job whose rank 1
// raises, on a loaded machine: a peer ended 40 to 70 ms before rank 1).
// The peer that ended first is then reported.
func firstFailure(heard []actorrt.ProcEnd) actorrt.ProcEnd {
	first := heard[0]
	if first.At.IsZero() {
		return first
	}
	for _, e := range heard[1:] {
		if !e.At.IsZero() && e.At.Before(first.At) {
			first = e
		}
	}
	return first
}

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
