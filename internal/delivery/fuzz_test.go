package delivery

import (
	"bytes"
	"testing"

	"github.com/monarch-go/monarch/bus"
	"github.com/monarch-go/monarch/ibverbs"
	"github.com/monarch-go/monarch/internal/jobenv"
	"github.com/monarch-go/monarch/internal/wire"
	"github.com/vmihailenco/msgpack/v5"
)

// frame encodes a frame of header h and payload p.
func frame(h wire.Header, p []byte) []byte {
	b, err := wire.AppendHeader(nil, &h)
	if err != nil {
		panic(err)
	}
	return append(b, p...)
}

// FuzzReceive gives a layer any bytes as a frame on its own subject or a
// mesh's it receives (the layer's frames, numbered frames and runs made
// up by a peer among them): it must drop what it cannot read, never
// panic, and keep within its bounds.
func FuzzReceive(f *testing.F) {
	var run wire.RunWriter
	run.Add(&wire.Header{Kind: wire.KindActor, Target: "m", Method: "M", Rank: -1}, [][]byte{{0x90}})
	run.Add(&wire.Header{Kind: wire.KindActor, Target: "m", Method: "M", Rank: -1}, [][]byte{{0x90}})
	seq := wire.Header{Kind: wire.KindActor, Target: "m", Method: "M", Rank: -1, From: "s", Seq: 1}
	oob := seq
	oob.Flags |= wire.FlagOutOfBand
	ref := func(r oobRef) []byte {
		b, err := msgpack.Marshal(&r)
		if err != nil {
			f.Fatal(err)
		}
		return b
	}
	for _, b := range [][]byte{
		// References a buggy peer sends: a made-up key at an address
		// nothing serves, a gigabyte claimed, another process's fd on
		// this host (init's).
		frame(oob, ref(oobRef{ID: 1, Size: 1 << 20, Handle: ibverbs.Handle{Size: 1 << 20, Key: 9, FD: -1, Addr: "127.0.0.1:1"}})),
		frame(oob, ref(oobRef{ID: 1, Size: 1 << 30, Handle: ibverbs.Handle{Size: 1 << 30, Key: 9, FD: -1, Addr: "127.0.0.1:1"}})),
		frame(oob, ref(oobRef{ID: 1, Size: 4096, Handle: ibverbs.Handle{Size: 4096, Key: 9, PID: 1, FD: 0, Boot: "any"}})),
		frame(seq, []byte{0x90}),
		frame(wire.Header{Kind: wire.KindRun, From: "s", Seq: 2, Rank: -1, Fences: []wire.Fence{{Key: "mesh.g", Seq: 4}}}, run.Bytes()),
		frame(wire.Header{Kind: wire.KindRun, From: "s", Seq: 9, Rank: -1}, nil),
		frame(wire.Header{Kind: wire.KindTail, From: "s", Seq: 12, Rank: -1}, nil),
		frame(wire.Header{Kind: wire.KindResend, Target: "proc.r", ReplyTo: "s", Rank: -1}, frame(seq, []byte{0x90})),
		frame(wire.Header{Kind: wire.KindNak, Target: "proc.s", ReplyTo: "s", Rank: -1}, wire.AppendSpan(nil, wire.Span{Lo: 1, Hi: 3})),
		frame(wire.Header{Kind: wire.KindNak, Flags: wire.FlagMissing, Target: "proc.r", ReplyTo: "s", Rank: -1}, wire.AppendSpan(nil, wire.Span{Lo: 1, Hi: 3})),
		frame(wire.Header{Kind: wire.KindAck, ReplyTo: "s", Rank: -1}, wire.AppendAcks(nil, &wire.Acks{Keys: []string{"proc.r"}, Seqs: []uint64{1}})),
	} {
		f.Add(b, false)
		f.Add(b, true)
	}
	srv, err := bus.StartServer(bus.ServerOptions{})
	if err != nil {
		f.Fatal(err)
	}
	defer srv.Shutdown()
	conn, err := bus.ConnectInProcess(srv, bus.ConnOptions{Name: "fuzz"})
	if err != nil {
		f.Fatal(err)
	}
	defer conn.Close()
	f.Fuzz(func(t *testing.T, data []byte, onMesh bool) {
		routed := 0
		l := New(Config{Self: "r", Subjects: testSubjects,
			Route: func(*wire.Frame, string) { routed++ },
			Lost:  func(string, string, string) {},
			Drop:  func(wire.DropKind, string, error) {}, Failed: func(*wire.Frame, string, error) {}, MaxPayload: 1 << 20}, conn)
		l.Subscribe(jobenv.MeshKey("g"))
		subject := testSubjects.Proc("r")
		if onMesh {
			subject = testSubjects.Mesh("g")
		}
		for range 3 { // again: repeats and what they free
			// A message's data is its handler's (bus.Message), and a
			// payload read out of band keeps its frame after the call:
			// not the fuzzer's buffer, which the next input overwrites.
			l.Receive(bus.Message{Subject: subject, Data: bytes.Clone(data)})
		}
		l.step(l.now())
		if l.in.Senders() > 1 || routed > 3*wire.MaxRun {
			t.Fatalf("%d senders, %d routed", l.in.Senders(), routed)
		}
	})
}
