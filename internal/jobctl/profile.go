package jobctl

import (
	"encoding/json"
	"fmt"
	"time"
)

// OpProfile asks the job's client for profiles of its procs: a
// ProfileRequest, answered by a ProfileAnswer.
const OpProfile = "profile"

// Bounds of a CPU profile's duration.
const (
	MinProfile = time.Second
	MaxProfile = 5 * time.Minute
)

// ProfileRequest selects the procs to profile and says how.
type ProfileRequest struct {
	Selection
	// Heap asks for heap profiles (taken at once, after a GC) instead of
	// CPU profiles.
	Heap bool `json:"heap,omitempty"`
	// Duration is how long each CPU profile runs: MinProfile to
	// MaxProfile. Not for heap profiles.
	Duration time.Duration `json:"duration,omitempty"`
	// Timeout bounds the wait for the procs' answers beyond Duration; a
	// proc that has not answered then is listed as such.
	Timeout time.Duration `json:"timeout"`
}

// Check says what is wrong with r's kind and duration, if anything.
func (r *ProfileRequest) Check() error {
	switch {
	case r.Heap && r.Duration != 0:
		return fmt.Errorf("a heap profile is taken at once: it has no duration")
	case !r.Heap && (r.Duration < MinProfile || r.Duration > MaxProfile):
		return fmt.Errorf("a CPU profile of %v: want %v to %v", r.Duration, MinProfile, MaxProfile)
	case r.Timeout < 0:
		return fmt.Errorf("a timeout of %v: want a positive duration", r.Timeout)
	}
	return nil
}

// ProfileBound is the bound of an OpProfile request with body: its
// Duration, its Timeout and a margin.
func ProfileBound(body json.RawMessage) time.Duration {
	var r ProfileRequest
	if json.Unmarshal(body, &r) != nil || r.Timeout <= 0 {
		return 0
	}
	return r.Duration + r.Timeout + 5*time.Second
}

// ProfileAnswer is the profiles of the selected procs, in mesh and rank
// order, the client first.
type ProfileAnswer struct {
	Job   string        `json:"job"`
	Procs []ProcProfile `json:"procs"`
}

// ProcProfile is one proc's profile, or why it has none (Missing).
type ProcProfile struct {
	ProcInfo
	// Profile is the proc's profile as runtime/pprof writes it (gzipped
	// protobuf); CPU samples carry the labels mesh, endpoint and rank of
	// the actor call they were taken in.
	Profile []byte `json:"profile,omitempty"`
}
