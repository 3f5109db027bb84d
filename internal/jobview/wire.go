package jobview

import "github.com/monarch-go/monarch/internal/jobctl"

// What a proc's inspector answers the client (msgpack, on the bus). Each
// proc builds its own answers from its own actors (actorrt); the client's
// model reads them.

// NumDurBuckets is how many buckets an endpoint's handler times fall in:
// one per bound of jobctl.DurationBounds, and one past them.
const NumDurBuckets = jobctl.NumDurationBounds + 1

// Figures is a proc's answer to Figures: its CPU time, memory, bus
// traffic and drops, and what its actors handled.
type Figures struct {
	CPUTicks int64         `msgpack:"cpu"` // USER_HZ ticks
	RSS      int64         `msgpack:"rss"` // bytes
	Handled  []MeshHandled `msgpack:"handled"`
	// Bus is the proc's bus connection's traffic; Dropped its drop
	// counts that are not zero, by kind.
	Bus     BusFigures        `msgpack:"bus"`
	Dropped map[string]uint64 `msgpack:"dropped,omitempty"`
}

// BusFigures is bus.Stats on the wire.
type BusFigures struct {
	InMsgs   uint64 `msgpack:"in_msgs"`
	OutMsgs  uint64 `msgpack:"out_msgs"`
	InBytes  uint64 `msgpack:"in_bytes"`
	OutBytes uint64 `msgpack:"out_bytes"`
}

// MeshHandled is what the members of one mesh on a proc handled: each
// member's count, the endpoints' figures summed over them, and the
// members that do not run.
type MeshHandled struct {
	Mesh      string            `msgpack:"mesh"`
	Ranks     []int             `msgpack:"ranks"` // base ranks
	Counts    []uint64          `msgpack:"counts"`
	Endpoints []EndpointFigures `msgpack:"endpoints,omitempty"`
	Down      []MemberDown      `msgpack:"down,omitempty"` // members not running
}

// EndpointFigures is what the members of a mesh on a proc handled through
// one endpoint: jobctl.EndpointState's figures, the sum in nanoseconds.
type EndpointFigures struct {
	Name    string   `msgpack:"name"`
	Calls   uint64   `msgpack:"calls"`
	Buckets []uint64 `msgpack:"buckets"`
	Nanos   uint64   `msgpack:"nanos"`
	Errors  uint64   `msgpack:"errors"`
}

// MemberDown is a member that does not run, as its proc sees it: its
// owner may be an actor in another proc, whose supervision the client
// does not see.
type MemberDown struct {
	Rank   int    `msgpack:"rank"` // base rank
	State  string `msgpack:"state"`
	Reason string `msgpack:"reason"`
}

// MaxDownReason bounds the reason a proc tells of a member.
const MaxDownReason = 1024

// Stacks is a proc's answer to Stacks: its goroutine profile and what
// its actors run.
type Stacks struct {
	Goroutines string     `msgpack:"goroutines"`
	Actors     []ActorNow `msgpack:"actors"`
}

// ActorNow is an actor and a call it runs: its endpoint, since when. An
// actor has one for each call running, its mailbox's and its concurrent
// endpoints' (actorrt.Concurrent); an idle one, one with no endpoint.
type ActorNow struct {
	Actor    string `msgpack:"actor"`
	Endpoint string `msgpack:"endpoint"`
	Since    int64  `msgpack:"since"` // Unix nanoseconds
}

// ProfileArgs is what a proc's inspector's Profile is asked.
type ProfileArgs struct {
	Heap  bool  `msgpack:"heap"`
	Nanos int64 `msgpack:"nanos"` // a CPU profile's duration
}
