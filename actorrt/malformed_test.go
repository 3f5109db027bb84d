package actorrt_test

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/monarch-go/monarch/actorrt"
	"github.com/monarch-go/monarch/logagg"
	"github.com/nats-io/nats.go"
	"github.com/vmihailenco/msgpack/v5"
)

// remoteDrops reads the drop counters of a proc.
var remoteDrops = actorrt.Remote("test_drop_counts", func(ctx context.Context) (map[string]uint64, error) {
	return actorrt.DropCounts(ctx), nil
})

// forged is one malformed message a peer sends, and the counter it must
// move.
type forged struct {
	name string
	kind string // the drop counter, as DropCounts names it
	msg  func(inbox string) *nats.Msg
}

func mp(t *testing.T, v any) []byte {
	t.Helper()
	b, err := msgpack.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// malformedMessages is a message of every kind of fault, addressed to the
// inbox of a proc (or the client).
func malformedMessages(t *testing.T) []forged {
	frame := func(h actorrt.TestHeader, payload []byte) func(string) *nats.Msg {
		data := actorrt.EncodeFrame(h, payload)
		return func(inbox string) *nats.Msg { return &nats.Msg{Subject: inbox, Data: data} }
	}
	control := func(op string, body []byte) func(string) *nats.Msg {
		return frame(actorrt.TestHeader{Kind: actorrt.KindControl, Method: op, ReplyTo: "peer", Rank: -1}, body)
	}
	withHeader := func(key, value string, data []byte) func(string) *nats.Msg {
		return func(inbox string) *nats.Msg {
			return &nats.Msg{Subject: inbox, Data: data, Header: nats.Header{key: []string{value}}}
		}
	}
	nilBody := []byte{0xc0}
	return []forged{
		{"a frame of 5 bytes", "frame", func(inbox string) *nats.Msg { return &nats.Msg{Subject: inbox, Data: []byte{0, 0, 0, 9, 1}} }},
		// A header of a few bytes claiming a region of 2^31 numbers: once
		// allocated in full on arrival.
		{"a region claiming 2^31 numbers", "frame", frame(actorrt.TestHeader{Kind: actorrt.KindActor, Target: "sys", Method: "Run", Rank: -1,
			Region: []byte{0xdd, 0x7f, 0xff, 0xff, 0xff, 1, 1, 1}}, nil)},
		{"a field of the wrong type", "frame", func(inbox string) *nats.Msg {
			hdr := mp(t, []any{3, 7, 0, "peer", "stop", -1, 0, nil}) // the target is an integer
			data := append([]byte{0, 0, 0, byte(len(hdr))}, hdr...)
			return &nats.Msg{Subject: inbox, Data: append(data, nilBody...)}
		}},
		{"an unknown kind", "kind", frame(actorrt.TestHeader{Kind: 99, Rank: -1}, nilBody)},
		{"an unknown op", "op", control("bogus", nilBody)},
		{"a stop whose mesh is a number", "body", control("stop", mp(t, map[string]any{"mesh": 5}))},
		// msgpack/v5 allocates a slice of the claimed length before it
		// reads it: 2^32 ranks from a few bytes.
		{"a spawn claiming 2^32 ranks", "body", control("spawn", []byte{0x81, 0xa5, 'r', 'a', 'n', 'k', 's', 0xdd, 0xff, 0xff, 0xff, 0xff, 1})},
		{"a stop of mesh \"\"", "ids", control("stop", mp(t, map[string]any{"mesh": ""}))},
		{"a notice that \"\" is gone", "ids", control("gone", mp(t, map[string]any{"proc": "", "reason": "forged"}))},
		{"a failure of nothing", "ids", control("failure", mp(t, map[string]any{"mesh": "", "id": "", "actor": "", "proc": "", "reason": "forged failure"}))},
		{"a port gone with no id", "ids", control("portgone", mp(t, map[string]any{"id": 0}))},
		{"a lookup of name \"\"", "ids", control("lookup", mp(t, map[string]any{"name": ""}))},
		{"a registration whose mesh is a number", "body", control("nameadd", mp(t, map[string]any{"mesh": 5}))},
		{"a spawn with an empty mesh id", "ids", frame(actorrt.TestHeader{Kind: actorrt.KindControl, Method: "spawn", Port: 77, ReplyTo: "peer", Rank: -1},
			mp(t, map[string]any{"mesh": "", "name": "n", "type": "T", "ranks": []int{0}, "procs": []string{"x"}, "owner": "c"}))},
		{"a call to a mesh not here", "ids", frame(actorrt.TestHeader{Kind: actorrt.KindActor, Target: "nowhere.m1", Method: "Ping", Rank: -1}, []byte{0x90})},
		{"a reply to port 0", "ids", frame(actorrt.TestHeader{Kind: actorrt.KindPort, Rank: 0}, nilBody)},
		{"a reply to a port never opened", "ids", frame(actorrt.TestHeader{Kind: actorrt.KindPort, Port: 1 << 50, ReplyTo: "peer", Rank: 0}, nilBody)},
		{"a batch header that is not a number", "bus-batch", withHeader("Mon-Batch", "many", []byte{1, 'x'})},
		// A part of 4 bytes claiming a message of 1 GiB in two parts.
		{"a chunk claiming 1 GiB", "bus-chunk", withHeader("Mon-Chunk", fmt.Sprintf("big 0 2 %d", 1<<30), []byte("tiny"))},
		{"a stray NATS header", "bus-header", withHeader("X-Stray", "1", nilBody)},
	}
}

// TestMalformedMessagesDropped plays a peer holding the job's token: it
// sends a malformed message of every kind, twice, to a proc and to the
// client. Each is dropped and counted, each kind logged once; afterwards
// calls still work both ways, and nothing hangs.
func TestMalformedMessagesDropped(t *testing.T) {
	ctx := testCtx(t)
	procs := spawnProcs(t, actorrt.Dims{{"gpus", 1}})
	echo := spawn[Echo](t, procs, "malformed-echo")
	proc := actorrt.ProcIDs(procs)[0]
	job, peer := jobPeer(t)

	procBefore := remoteCounts(t, ctx, procs)
	clientBefore := actorrt.DropCounts(clientCtx)
	want := map[string]uint64{}
	msgs := malformedMessages(t)
	// A region that does not fit the mesh, on the mesh's own subject.
	regionBad := actorrt.EncodeFrame(actorrt.TestHeader{Kind: actorrt.KindActor, Target: meshID(t, echo), Method: "Ping", Rank: -1,
		Region: []byte{0x96, 0, 1, 1, 0, 1, 1}}, []byte{0x90})
	for range 2 {
		for _, m := range msgs {
			for _, inbox := range []string{actorrt.ProcSubject(clientCtx, proc), actorrt.ProcSubject(clientCtx, actorrt.ClientProc)} {
				if err := peer.PublishMsg(m.msg(inbox)); err != nil {
					t.Fatalf("%s: %v", m.name, err)
				}
			}
			want[m.kind]++
		}
		if err := peer.Publish(actorrt.MeshSubjectOf(echo), regionBad); err != nil {
			t.Fatal(err)
		}
	}
	if err := peer.Flush(); err != nil {
		t.Fatal(err)
	}
	procWant := maps.Clone(want)
	procWant["region"] += 2

	waitCounts(t, "client", clientBefore, want, clientDrops)
	waitCounts(t, "proc "+proc, procBefore, procWant, func() map[string]uint64 { return remoteCounts(t, ctx, procs) })

	// Still working: calls from the client to the proc, a channel of the
	// client, and the forged failure reached no supervisor.
	for i := 0; i < 5; i++ {
		if v, err := actorrt.Method1((*Echo).Say).CallOne(echo, "still here").Get(ctx); err != nil || v != "still here" {
			t.Fatalf("call after the malformed messages: %q, %v", v, err)
		}
	}
	port, recv := actorrt.OpenChannel[string](ctx)
	defer recv.Close()
	if err := actorrt.Method1((*Echo).Say).Send(echo, port, "back"); err != nil {
		t.Fatal(err)
	}
	if v, err := recv.Recv().Get(ctx); err != nil || v != "back" {
		t.Fatalf("a reply on a channel: %q, %v", v, err)
	}
	failures.mu.Lock()
	for _, f := range failures.all {
		if f.Reason == "forged failure" {
			t.Errorf("a forged failure reached the hook: %v", f)
		}
	}
	failures.mu.Unlock()

	// One system log line per kind, however many of them came.
	checkLoggedOnce(t, job, "client", want)
	checkLoggedOnce(t, job, "proc-"+proc, procWant)
}

// TestRepliesForPortsNeverOpened: a peer sends the client replies for the
// next port ids it will open, as if from a proc. The client must not tell
// that proc those ports are closed, or the proc would refuse to answer the
// real calls that open them, and they would hang.
func TestRepliesForPortsNeverOpened(t *testing.T) {
	ctx := testCtx(t)
	procs := spawnProcs(t, actorrt.Dims{{"gpus", 1}})
	echo := spawn[Echo](t, procs, "unopened-echo")
	proc := actorrt.ProcIDs(procs)[0]
	_, peer := jobPeer(t)

	before := actorrt.DropCounts(clientCtx)
	const n = 20
	next := actorrt.NextPortID(clientCtx)
	for id := next; id < next+n; id++ {
		f := actorrt.EncodeFrame(actorrt.TestHeader{Kind: actorrt.KindPort, Port: id, ReplyTo: proc, Rank: 0}, []byte{0xc0})
		if err := peer.Publish(actorrt.ProcSubject(clientCtx, actorrt.ClientProc), f); err != nil {
			t.Fatal(err)
		}
	}
	peer.Flush()
	waitCounts(t, "client", before, map[string]uint64{"ids": n}, clientDrops)
	for i := 0; i < n; i++ {
		callCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, err := actorrt.Method((*Echo).Ping).CallOne(echo).Get(callCtx)
		cancel()
		if err != nil {
			t.Fatalf("call %d (ports from %d on were forged): %v", i, next, err)
		}
	}
}

// jobPeer connects to the job's bus as a peer holding its token would,
// until the test ends; it returns the job's id too.
func jobPeer(t *testing.T) (string, *nats.Conn) {
	t.Helper()
	job, url, token := actorrt.JobBus(clientCtx)
	peer, err := nats.Connect(url, nats.Token(token))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(peer.Close)
	return job, peer
}

func remoteCounts(t *testing.T, ctx context.Context, procs *actorrt.ProcMesh) map[string]uint64 {
	t.Helper()
	v, err := remoteDrops.Call(procs).Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return v.Values()[0]
}

// waitCounts waits (bounded) until the counters have moved by want, then
// checks that they moved by exactly that.
func waitCounts(t *testing.T, who string, before, want map[string]uint64, read func() map[string]uint64) {
	t.Helper()
	// A bound against a hang, not a speed: 20,000 forged payloads, each a
	// refused connection, took 10 s here alone and over 20 s beside other
	// work.
	deadline := time.Now().Add(time.Minute)
	var now map[string]uint64
	for {
		now = read()
		done := true
		for k, n := range want {
			if now[k]-before[k] < n {
				done = false
			}
		}
		if done || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	for _, k := range slices.Sorted(maps.Keys(now)) {
		if got := now[k] - before[k]; got != want[k] {
			t.Errorf("%s: %d drops of kind %s, want %d", who, got, k, want[k])
		}
	}
}

// checkLoggedOnce checks that the system log of role has one drop line for
// each kind in kinds.
func checkLoggedOnce(t *testing.T, job, role string, kinds map[string]uint64) {
	t.Helper()
	path := filepath.Join(logagg.SystemLogDir(), "monarch_"+job+"_"+role+".log")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for k := range kinds {
		tag := fmt.Sprintf("%q:%q", "drop", k)
		if n := bytes.Count(data, []byte(tag)); n != 1 {
			t.Errorf("%s: %d log lines for drops of kind %s, want 1", path, n, k)
		}
	}
}

// meshID is the id of a mesh, the last part of its subject.
func meshID[A any](t *testing.T, m *actorrt.ActorMesh[A]) string {
	t.Helper()
	subj := actorrt.MeshSubjectOf(m)
	i := strings.Index(subj, ".mesh.")
	if i < 0 {
		t.Fatalf("mesh subject %q", subj)
	}
	return subj[i+len(".mesh."):]
}

// clientDrops is the client's drop counters.
func clientDrops() map[string]uint64 { return actorrt.DropCounts(clientCtx) }
