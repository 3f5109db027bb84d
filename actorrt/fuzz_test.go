package actorrt

import (
	"bytes"
	"math"
	"reflect"
	"runtime/metrics"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
)

// Fuzz targets for what a peer can send a proc: frames and control
// messages. `go test` runs their seed corpora (testdata/fuzz/FuzzX) as
// plain tests; `go test -fuzz '^FuzzX$'` explores further.

// allocSlack is what allocatedBy may count beyond what fn allocated:
// runtime/metrics counts small objects a span at a time (large ones as
// they are made), and the runtime's own goroutines allocate meanwhile.
const allocSlack = 256 << 10

// allocatedBy is the smallest number of heap bytes fn allocated over
// three runs.
func allocatedBy(fn func()) uint64 {
	sample := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	best := uint64(math.MaxUint64)
	for range 3 {
		metrics.Read(sample)
		before := sample[0].Value.Uint64()
		fn()
		metrics.Read(sample)
		best = min(best, sample[0].Value.Uint64()-before)
	}
	return best
}

// seedFrames are frames as the runtime writes them.
func seedFrames() [][]byte {
	base, _ := NewExtent(Dims{{"hosts", 2}, {"gpus", 4}})
	sliced, _ := wholeRegion(base).slice("gpus", 1, 3)
	one, _ := sliced.at("hosts", 1)
	var out [][]byte
	for _, c := range []struct {
		h       header
		payload any
	}{
		{header{kind: kindActor, target: "c.m1", method: "GetValue", port: 9, replyTo: "c", rank: -1}, []any{}},
		{header{kind: kindActor, target: "c-1.m12", method: "Step", rank: -1, region: &one}, []any{"x", 3, []byte{1, 2}}},
		{header{kind: kindPort, port: 1 << 40, replyTo: "c-2", rank: 7, flags: flagError}, wireError{Message: "boom"}},
		{header{kind: kindPort, port: 3, replyTo: "c", rank: 0, flags: flagLast}, 42},
		{header{kind: kindControl, method: opStop, replyTo: "c", rank: -1}, stopReq{Mesh: "c.m1"}},
	} {
		w, err := newFrame(&c.h, 1<<30)
		if err != nil {
			panic(err)
		}
		if err := w.enc.Encode(c.payload); err != nil {
			panic(err)
		}
		out = append(out, append([]byte(nil), w.bytes()...))
		w.free()
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
	base, _ := NewExtent(Dims{{"hosts", 2}, {"gpus", 4}})
	f.Fuzz(func(t *testing.T, data []byte) {
		var fr frame
		var err error
		n := allocatedBy(func() { fr, err = parseFrame(data) })
		if limit := uint64(8*len(data)) + allocSlack; n > limit {
			t.Fatalf("a frame of %d bytes allocated %d", len(data), n)
		}
		if err != nil {
			return
		}
		if r, err := fr.region.toRegion(base); err == nil && fr.region != nil {
			// A region that fits a mesh is one the sender can write.
			h := fr.h
			h.region = &r
			w, err := newFrame(&h, 1<<30)
			if err != nil {
				t.Fatal(err)
			}
			again, err := parseFrame(append(w.bytes(), fr.payload...))
			w.free()
			if err != nil || !reflect.DeepEqual(again.region, fr.region) {
				t.Fatalf("region %v written again: %v, %v", fr.region, again.region, err)
			}
		}
		// Write the header again (the region as read) and parse it back.
		h := fr.h
		h.region = nil
		w, err := newFrame(&h, 1<<30)
		if err != nil {
			t.Fatalf("header %+v cannot be written again: %v", h, err)
		}
		b := append([]byte(nil), w.bytes()...)
		w.free()
		if fr.region != nil {
			b = appendWireRegion(b[:len(b)-1], fr.region)
			putHeaderLen(b)
		}
		b = append(b, fr.payload...)
		again, err := parseFrame(b)
		if err != nil {
			t.Fatalf("written again, the frame does not parse: %v", err)
		}
		if again.h != fr.h || !reflect.DeepEqual(again.region, fr.region) || !bytes.Equal(again.payload, fr.payload) {
			t.Fatalf("written again: %+v %v, want %+v %v", again.h, again.region, fr.h, fr.region)
		}
	})
}

func appendWireRegion(b []byte, wr wireRegion) []byte {
	b = appendArrayLen(b, len(wr))
	for _, v := range wr {
		b = appendInt(b, int64(v))
	}
	return b
}

func putHeaderLen(b []byte) {
	n := len(b) - 4
	b[0], b[1], b[2], b[3] = byte(n>>24), byte(n>>16), byte(n>>8), byte(n)
}

// seedControls are control bodies as the runtime writes them.
func seedControls() []struct {
	op   string
	body []byte
} {
	args, _ := msgpack.Marshal([]any{3})
	var out []struct {
		op   string
		body []byte
	}
	for _, c := range []struct {
		op   string
		body any
	}{
		{opSpawn, &spawnReq{Mesh: "c.m1", Name: "counters", Type: "pkg.Counter", Dims: Dims{{"gpus", 2}}, Ranks: []int{1}, Args: args, Procs: []string{"c-1", "c-2"}, Owner: "c"}},
		{opStop, &stopReq{Mesh: "c.m1"}},
		{opGone, &goneNotice{Proc: "c-1", Reason: "killed by SIGKILL", Stopped: false}},
		{opPortGone, &portGone{ID: 12}},
		{opSpawnProcs, &spawnProcsReq{IDs: []string{"c-1", "c-2"}, Ranks: []int{0, 1}, Env: [][]string{{"A=1"}, {"A=2"}}, Proc: "c", Port: 4}},
		{opStopProcs, &stopProcsReq{IDs: []string{"c-1"}, Rank: 0}},
		{opSyncLogs, &stopProcsReq{IDs: []string{"c-1"}, Rank: 1}},
		{opFailure, &MeshFailure{Mesh: "w", MeshID: "c.m3", ActorID: "w[1]", Proc: "c-2", Reason: "Step error: x", Dims: Dims{{"gpus", 2}}, Coords: []int{1}, Base: 1,
			Err: &ActorError{ActorID: "w[1]", Proc: "c-2", Endpoint: "Step", Message: "x"}}},
		{opHeartbeat, nil},
		{opAgentsHello, nil},
	} {
		b, err := msgpack.Marshal(c.body)
		if err != nil {
			panic(err)
		}
		out = append(out, struct {
			op   string
			body []byte
		}{c.op, b})
	}
	return out
}

// FuzzControl reads one control message: no panic, an allocation bounded
// by the body's length, and a message that is accepted is accepted again,
// the same, once its body is written again.
func FuzzControl(f *testing.F) {
	for _, c := range seedControls() {
		f.Add(c.op, c.body, uint64(5), "c")
	}
	f.Fuzz(func(t *testing.T, op string, body []byte, port uint64, replyTo string) {
		fr := &frame{h: header{kind: kindControl, method: op, port: port, replyTo: replyTo, rank: -1}, payload: body}
		var got any
		var err error
		n := allocatedBy(func() { got, _, err = readControl(fr) })
		if limit := uint64(64*len(body)) + allocSlack; n > limit {
			t.Fatalf("a body of %d bytes allocated %d", len(body), n)
		}
		if err != nil {
			return
		}
		again, err := msgpack.Marshal(got)
		if err != nil {
			t.Fatalf("accepted %T cannot be written again: %v", got, err)
		}
		fr.payload = again
		got2, _, err := readControl(fr)
		if err != nil {
			t.Fatalf("accepted %T refused once written again: %v", got, err)
		}
		if !reflect.DeepEqual(got, got2) {
			t.Fatalf("written again: %+v, want %+v", got2, got)
		}
	})
}

// FuzzCheckMsgpack holds checkMsgpack to msgpack itself: whatever the
// decoder reads in full, the check accepts (it refuses no payload a peer
// of the same program could send); the check allocates next to nothing,
// and what it accepts decodes within a bound proportional to its length.
func FuzzCheckMsgpack(f *testing.F) {
	for _, v := range []any{
		nil, true, 1, -1, 1 << 40, 3.5, float32(2), "s", string(make([]byte, 300)), []byte{1, 2},
		[]any{1, "a", []any{nil, map[string]any{"k": []int{1, 2}}}}, map[string]any{"a": 1, "b": []byte("x")},
		wireError{Sentinel: "x", Actor: &ActorError{ActorID: "a[0]"}, Message: "m"},
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
		if n := allocatedBy(func() { _, err = checkMsgpack(b) }); n > uint64(16*len(b))+allocSlack {
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
		limit := uint64(64*len(b)) + allocSlack
		if n := allocatedBy(func() { decodeAll(b) }); n > limit {
			t.Fatalf("decoding %d accepted bytes into any allocated %d", len(b), n)
		}
		for _, v := range []any{new(map[string][]int), new(map[string]any), new([]map[string][]string), new(spawnReq)} {
			n := allocatedBy(func() {
				decodePayload(b, []reflect.Type{reflect.TypeOf(v)}, func(d *msgpack.Decoder) error { return d.Decode(v) })
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
