package wire

import (
	"bytes"
	"reflect"
	"testing"

	"github.com/monarch-go/monarch/internal/testenv/alloc"
	"github.com/vmihailenco/msgpack/v5"
)

// Fuzz targets for what a peer can send: frames and payloads. `go test`
// runs their seed corpora (testdata/fuzz/FuzzX) as plain tests;
// `go test -fuzz '^FuzzX$'` explores further.

// seedFrames are frames as the runtime writes them.
func seedFrames() [][]byte {
	// hosts=2, gpus=4 sliced to gpus 1:3, then indexed at hosts=1.
	one := []int{1, 1, 0, 1, 2, 1}
	var out [][]byte
	for _, c := range []struct {
		h       Header
		payload any
	}{
		{Header{Kind: KindActor, Target: "c.m1", Method: "GetValue", Port: 9, ReplyTo: "c", Rank: -1}, []any{}},
		{Header{Kind: KindActor, Target: "c-1.m12", Method: "Step", Rank: -1, Region: one}, []any{"x", 3, []byte{1, 2}}},
		{Header{Kind: KindPort, Port: 1 << 40, ReplyTo: "c-2", Rank: 7, Flags: FlagError}, ErrorReply{Message: "boom"}},
		{Header{Kind: KindPort, Port: 3, ReplyTo: "c", Rank: 0, Flags: FlagLast}, 42},
		{Header{Kind: KindControl, Method: OpStopProcs, ReplyTo: "c", Rank: -1}, StopProcsReq{IDs: []string{"c-1"}}},
		{Header{Kind: KindControl, Method: OpRespawnProc, ReplyTo: "c", Port: 4, Rank: -1}, RespawnProcReq{Old: "c-1", New: "c-5", Proc: "c", Port: 4}},
	} {
		w, err := NewFrame(&c.h, 1<<30)
		if err != nil {
			panic(err)
		}
		if err := w.Enc.Encode(c.payload); err != nil {
			panic(err)
		}
		out = append(out, append([]byte(nil), w.Bytes()...))
		w.Free()
	}
	return out
}

// FuzzParseFrame decodes one frame: no panic, an allocation bounded by
// the frame's length, and a frame that parses comes out the same when
// written again.
func FuzzParseFrame(f *testing.F) {
	for _, b := range seedFrames() {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var fr Frame
		var err error
		n := alloc.By(func() { fr, err = Parse(data) })
		checkCommonForm(t, data)
		if limit := uint64(8*len(data)) + alloc.Slack; n > limit {
			t.Fatalf("a frame of %d bytes allocated %d", len(data), n)
		}
		if err != nil {
			return
		}
		// Write the header again (the region as read) and parse it back.
		w, err := NewFrame(&fr.Header, 1<<30)
		if err != nil {
			t.Fatalf("header %+v cannot be written again: %v", fr.Header, err)
		}
		b := append(append([]byte(nil), w.Bytes()...), fr.Payload...)
		w.Free()
		again, err := Parse(b)
		if err != nil {
			t.Fatalf("written again, the frame does not parse: %v", err)
		}
		if !reflect.DeepEqual(again.Header, fr.Header) || !bytes.Equal(again.Payload, fr.Payload) {
			t.Fatalf("written again: %+v, want %+v", again.Header, fr.Header)
		}
	})
}

// FuzzCheckMsgpack holds CheckMsgpack to msgpack itself: whatever the
// decoder reads in full, the check accepts (it refuses no payload a peer
// of the same program could send); the check allocates next to nothing,
// and what it accepts decodes within a bound proportional to its length.
func FuzzCheckMsgpack(f *testing.F) {
	for _, v := range []any{
		nil, true, 1, -1, 1 << 40, 3.5, float32(2), "s", string(make([]byte, 300)), []byte{1, 2},
		[]any{1, "a", []any{nil, map[string]any{"k": []int{1, 2}}}}, map[string]any{"a": 1, "b": []byte("x")},
		ErrorReply{Sentinel: "x", Message: "m"},
	} {
		b, err := msgpack.Marshal(v)
		if err != nil {
			panic(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var err error
		// (Its stack grows with the nesting past 16 levels: 8 bytes a
		// level, at most a level a byte.)
		if n := alloc.By(func() { _, err = CheckMsgpack(b) }); n > uint64(16*len(b))+alloc.Slack {
			t.Fatalf("checking %d bytes allocated %d", len(b), n)
		}
		if err != nil {
			// Refused: msgpack must not read it in full either. (Decoding
			// unchecked bytes can allocate what they claim: short ones
			// only, and no 32-bit lengths.)
			if len(b) <= 64 && !has32BitLength(b) && decodeAll(b) {
				t.Fatalf("refused %x (%v), which msgpack reads", b, err)
			}
			return
		}
		// Accepted: decoding, into any or into types that hold maps and
		// slices, allocates in proportion.
		limit := uint64(64*len(b)) + alloc.Slack
		if n := alloc.By(func() { decodeAll(b) }); n > limit {
			t.Fatalf("decoding %d accepted bytes into any allocated %d", len(b), n)
		}
		for _, v := range []any{new(map[string][]int), new(map[string]any), new([]map[string][]string), new(SpawnProcsReq)} {
			n := alloc.By(func() {
				DecodePayload(b, []reflect.Type{reflect.TypeOf(v)}, func(d *msgpack.Decoder) error { return d.Decode(v) })
			})
			if n > limit {
				t.Fatalf("decoding %d accepted bytes into %T allocated %d", len(b), v, n)
			}
		}
	})
}

// has32BitLength reports whether b holds a code with a 32-bit length
// anywhere: decoding it unchecked may allocate gigabytes.
func has32BitLength(b []byte) bool {
	for _, c := range b {
		switch c {
		case 0xc6, 0xc9, 0xdb, 0xdd, 0xdf:
			return true
		}
	}
	return false
}

// decodeAll decodes every value in b into an any, and reports whether it
// read them all.
func decodeAll(b []byte) bool {
	r := bytes.NewReader(b)
	d := msgpack.NewDecoder(r)
	for r.Len() > 0 {
		if _, err := d.DecodeInterface(); err != nil {
			return false
		}
	}
	return true
}
