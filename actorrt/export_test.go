package actorrt

import (
	"context"
	"fmt"

	"github.com/monarch-go/monarch/internal/delivery"
	"github.com/monarch-go/monarch/internal/jobctl"
	"github.com/monarch-go/monarch/internal/jobenv"
	"github.com/monarch-go/monarch/internal/wire"
)

// Hooks for the black-box tests that play a buggy or hostile peer of the
// job (malformed_test.go). Compiled into the test binary only. Each acts
// on the runtime its ctx belongs to.

// mustRuntime is ctx's runtime; a test that passes a ctx of none is wrong.
func mustRuntime(ctx context.Context) *core {
	rt, err := runtimeOf(ctx)
	if err != nil {
		panic(err)
	}
	return rt
}

// DropCounts returns the drop counters of this process, by kind (the
// dispatcher's, and the bus connection's as bus-<kind>).
func DropCounts(ctx context.Context) map[string]uint64 {
	rt, err := runtimeOf(ctx)
	if err != nil {
		return nil
	}
	return rt.dropCounts()
}

// ClientState is the client's job state feed, as the metrics endpoint
// reads it (refresh and snapshot).
func ClientState(ctx context.Context) (*jobctl.JobState, error) {
	rt, err := runtimeOf(ctx)
	if err != nil {
		return nil, err
	}
	c := rt.client()
	if c == nil {
		return nil, fmt.Errorf("not the client")
	}
	return c.view.State(ctx, jobctl.DefaultStateTimeout), nil
}

// JobBus returns the job id, bus URL and token of this process: what a
// peer of the job holds.
func JobBus(ctx context.Context) (job, url, token string) {
	rt := mustRuntime(ctx)
	return rt.job, rt.bus.URL, rt.bus.Token
}

// HubLeafNodes is the number of leaves linked to the client's own bus
// (the hub of a program run directly); 0 elsewhere.
func HubLeafNodes(ctx context.Context) int {
	rt, err := runtimeOf(ctx)
	if err != nil || rt.client() == nil || rt.client().server == nil {
		return 0
	}
	return rt.client().server.NumLeafNodes()
}

// HubAgentWatches is how many subscriptions to host agents' heartbeat
// and link subjects the client's own bus (the hub of a program run
// directly) holds, from every connection; -1 elsewhere.
func HubAgentWatches(ctx context.Context) (heartbeats, links int) {
	rt, err := runtimeOf(ctx)
	if err != nil || rt.client() == nil || rt.client().server == nil {
		return -1, -1
	}
	srv := rt.client().server
	return srv.Interest(rt.subjects.HeartbeatPrefix()).Under, srv.Interest(rt.subjects.LinkPrefix()).Under
}

// ProcSubject is the subject of a proc's inbox; ClientProc the client's id.
func ProcSubject(ctx context.Context, proc string) string {
	return mustRuntime(ctx).subjects.Proc(proc)
}

const ClientProc = jobenv.ClientID

// MeshSubjectOf is the subject of an actor mesh.
func MeshSubjectOf[A any](m *ActorMesh[A]) string { return m.ref.subject }

// ProcIDs lists the procs of a proc mesh, by rank.
func ProcIDs(p *ProcMesh) []string { return p.ids() }

// NextPortID is the id of the next port this process opens.
func NextPortID(ctx context.Context) uint64 {
	rt := mustRuntime(ctx)
	rt.ports.mu.Lock()
	defer rt.ports.mu.Unlock()
	return rt.ports.next + 1
}

// Message kinds and flags, for forged frames.
const (
	KindActor   = wire.KindActor
	KindPort    = wire.KindPort
	KindControl = wire.KindControl
	KindTail    = wire.KindTail
	KindRun     = wire.KindRun
	KindNak     = wire.KindNak
	KindAck     = wire.KindAck
	FlagMissing = wire.FlagMissing
)

// SpanBody is the body of a NAK, or of its answer: the numbers lo..hi.
func SpanBody(lo, hi uint64) []byte { return wire.AppendSpan(nil, wire.Span{Lo: lo, Hi: hi}) }

// DeliverySenders is how many senders this process's delivery layer
// tracks.
func DeliverySenders(ctx context.Context) int { return mustRuntime(ctx).delivery.Senders() }

// SenderStanding is what this process's delivery layer takes sender id
// for: "member", "stranger" or "unknown".
func SenderStanding(ctx context.Context, id string) string {
	return mustRuntime(ctx).members.standing(id).String()
}

// TestHeader is a frame header as a peer writes it. Region, if set, is
// written as is in place of the region (nil there writes none).
type TestHeader struct {
	Kind    uint8
	Target  string
	Port    uint64
	ReplyTo string
	Method  string
	Rank    int
	Flags   uint8
	Region  []byte
	From    string // with Seq: a numbered frame's sender
	Seq     uint64
}

// EncodeFrame writes a frame with the runtime's own encoder.
func EncodeFrame(th TestHeader, payload []byte) []byte {
	h := wire.Header{Kind: th.Kind, Target: th.Target, Port: th.Port, ReplyTo: th.ReplyTo, Method: th.Method, Rank: th.Rank, Flags: th.Flags,
		From: th.From, Seq: th.Seq}
	w, err := wire.NewFrame(&h, 1<<30)
	if err != nil {
		panic(err)
	}
	defer w.Free()
	b := append([]byte(nil), w.Bytes()...)
	if th.Region != nil && th.Seq == 0 {
		b = append(b[:len(b)-1], th.Region...) // in place of nil
		n := len(b) - 4
		b[0], b[1], b[2], b[3] = byte(n>>24), byte(n>>16), byte(n>>8), byte(n)
	}
	return append(b, payload...)
}

// LogStats counts what the client received of its procs' output.
type LogStats struct {
	Lines int64 // lines received (each recorded, and printed if streamed)
	Bad   int64 // messages that could not be decoded
}

// ClientLogStats returns the client's counts of its procs' lines so
// far; zero outside the client.
func ClientLogStats(ctx context.Context) LogStats {
	rt, err := runtimeOf(ctx)
	if err != nil || rt.client() == nil {
		return LogStats{}
	}
	l := rt.client().logs
	return LogStats{Lines: l.lines.Load(), Bad: l.bad.Load()}
}

// ReceivedCounts counts what this process's dispatcher took: frames by
// kind (actor, port, control) and notices of ends.
func ReceivedCounts(ctx context.Context) map[string]uint64 {
	rt, err := runtimeOf(ctx)
	if err != nil {
		return nil
	}
	return map[string]uint64{
		"actor": rt.received[wire.KindActor].Load(), "port": rt.received[wire.KindPort].Load(),
		"control": rt.received[wire.KindControl].Load(), "gone": rt.notices.Load(),
	}
}

// SetChildBusURL makes the procs this process starts from now on dial
// url (a proxy a test can cut); restore undoes it.
func SetChildBusURL(ctx context.Context, url string) (hub string, restore func()) {
	rt := mustRuntime(ctx)
	old := rt.bus
	b := old
	b.URL = url
	rt.agent.SetBus(b)
	return old.URL, func() { rt.agent.SetBus(old) }
}

// SetMaxFences sets how many fences a frame of this process carries, until
// the returned restore is called.
func SetMaxFences(n int) (restore func()) { return delivery.SetMaxFences(n) }

// IdleSpares counts the spares, up and waiting for a slot, that the host
// agent of ctx's runtime keeps (WithSpares).
func IdleSpares(ctx context.Context) int { return mustRuntime(ctx).agent.IdleSpares() }
