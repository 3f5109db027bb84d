package delivery

import (
	"bytes"
	"testing"
	"time"

	"github.com/monarch-go/monarch/bus"
	"github.com/monarch-go/monarch/ibverbs"
	"github.com/monarch-go/monarch/internal/jobenv"
	"github.com/monarch-go/monarch/internal/reliable"
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

// fuzzConn is a connection to a bus of the fuzz target's own.
func fuzzConn(f *testing.F) *bus.Conn {
	srv, err := bus.StartServer(bus.ServerOptions{})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(srv.Shutdown)
	conn, err := bus.ConnectInProcess(srv, bus.ConnOptions{Name: "fuzz"})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(conn.Close)
	return conn
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
	conn := fuzzConn(f)
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

// FuzzForgedSenders gives a layer any sequence of numbered frames, tail
// markers and "no longer held" answers, from the client (a member), a
// stranger and a sender it asks about (and finds a stranger), with
// numbers near and far (2^40, 2^63), and ticks past the give-up between
// them. Whatever comes, only the member's word may make messages lost,
// the layer tracks at most its bound on strangers of the others, and
// nothing panics.
func FuzzForgedSenders(f *testing.F) {
	// Two bytes a step: what (high nibble: 0 an empty run, 1 an actor
	// frame fenced on its own number, 2 a tail marker, 3 "no longer
	// held" for 2..n, 4 a tick x seconds on) and from whom (low nibble:
	// 0 the client, 1 a stranger, 2 one asked about); then x, the number
	// (numbers[x]).
	//
	// A stranger's empty run numbered 1, another numbered 3, its "no
	// longer held" for 2.
	f.Add([]byte{0x01, 0, 0x01, 2, 0x31, 1})
	// In the client's name: four frames 2^40 on and a tail at 2^63.
	f.Add([]byte{0x10, 5, 0x10, 5, 0x10, 5, 0x10, 5, 0x20, 6})
	// A gap in the client's name, then ticks past the give-up.
	f.Add([]byte{0x00, 0, 0x00, 3, 0x40, 30, 0x40, 30, 0x40, 30})
	// The one asked about, delivered from, then its answer.
	f.Add([]byte{0x02, 0, 0x02, 2, 0x32, 1})
	conn := fuzzConn(f)
	froms := []string{"c", "stranger", "c-7"}
	numbers := []uint64{1, 2, 3, 5, 1 << 20, 1 << 40, 1 << 63, ^uint64(0)}
	f.Fuzz(func(t *testing.T, data []byte) {
		var lost []string
		var l *Layer
		l = New(Config{Self: "r", Subjects: testSubjects,
			Route: func(*wire.Frame, string) {},
			Lost:  func(from, key, why string) { lost = append(lost, from) },
			Drop:  func(wire.DropKind, string, error) {}, Failed: func(*wire.Frame, string, error) {}, MaxPayload: 1 << 20,
			Standing: func(id string) reliable.Standing {
				switch id {
				case "c":
					return reliable.Member
				case "c-7":
					return reliable.Unknown
				}
				return reliable.Stranger
			},
			Ask: func(id string) { l.Judged(id, reliable.Stranger) }}, conn)
		subject := testSubjects.Proc("r")
		now := l.now()
		for len(data) >= 2 {
			op, x := data[0], data[1]
			data = data[2:]
			from, n := froms[int(op&0x0f)%len(froms)], numbers[int(x)%len(numbers)]
			var b []byte
			switch op >> 4 % 5 {
			case 0:
				b = frame(wire.Header{Kind: wire.KindRun, From: from, Seq: n, Rank: -1}, nil)
			case 1:
				b = frame(wire.Header{Kind: wire.KindActor, Target: "m", Method: "M", From: from, Seq: n, Rank: -1,
					Fences: []wire.Fence{{Key: jobenv.ProcKey("r"), Seq: n}}}, []byte{0x90})
			case 2:
				b = frame(wire.Header{Kind: wire.KindTail, From: from, Seq: n, Rank: -1}, nil)
			case 3:
				b = frame(wire.Header{Kind: wire.KindNak, Flags: wire.FlagMissing, Target: jobenv.ProcKey("r"), ReplyTo: from, Rank: -1},
					wire.AppendSpan(nil, wire.Span{Lo: min(n, 2), Hi: n}))
			case 4:
				now = now.Add(time.Duration(x) * time.Second)
				l.step(now)
				continue
			}
			l.Receive(bus.Message{Subject: subject, Data: b})
		}
		l.step(now)
		for _, from := range lost {
			if from != "c" {
				t.Fatalf("messages of %s said lost: only a member's word counts", from)
			}
		}
		l.inMu.Lock()
		defer l.inMu.Unlock()
		if s := l.in.Strangers(); s > reliable.DefaultInLimits.Strangers {
			t.Fatalf("%d strangers tracked", s)
		}
	})
}
