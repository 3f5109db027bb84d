package actorrt

import (
	"reflect"
	"testing"
	"time"

	"github.com/monarch-go/monarch/internal/testenv/alloc"
	"github.com/monarch-go/monarch/internal/wire"
	"github.com/vmihailenco/msgpack/v5"
)

// Fuzz targets for what a peer can send a proc that the runtime reads
// beyond the frame (package wire fuzzes frames and payloads): control
// messages and regions. `go test` runs their seed corpora
// (testdata/fuzz/FuzzX) as plain tests; `go test -fuzz '^FuzzX$'` explores
// further.

// FuzzRegionJoin parses one frame and joins its region to a mesh: a
// region that fits the mesh is one the sender can write.
func FuzzRegionJoin(f *testing.F) {
	base, _ := NewExtent(Dims{{"hosts", 2}, {"gpus", 4}})
	sliced, _ := wholeRegion(base).slice("gpus", 1, 3)
	one, _ := sliced.at("hosts", 1)
	for _, r := range []region{sliced, one} {
		f.Add(frameTo(r))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		fr, err := wire.Parse(data)
		if err != nil || fr.Region == nil {
			return
		}
		r, err := wireRegion(fr.Region).toRegion(base)
		if err != nil {
			return
		}
		h := fr.Header
		h.Region = r.appendWire(nil)
		w, err := wire.NewFrame(&h, 1<<30)
		if err != nil {
			t.Fatal(err)
		}
		again, err := wire.Parse(append(w.Bytes(), fr.Payload...))
		w.Free()
		if err != nil || !reflect.DeepEqual(again.Region, fr.Region) {
			t.Fatalf("region %v written again: %v, %v", fr.Region, again.Region, err)
		}
	})
}

// frameTo is a call to the members of r, as the runtime writes it.
func frameTo(r region) []byte {
	h := wire.Header{Kind: wire.KindActor, Target: "c-1.m12", Method: "Step", Rank: -1, Region: r.appendWire(nil)}
	w, err := wire.NewFrame(&h, 1<<30)
	if err != nil {
		panic(err)
	}
	defer w.Free()
	w.Enc.Encode([]any{"x", 3})
	return append([]byte(nil), w.Bytes()...)
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
		{wire.OpSpawn, &spawnReq{Mesh: "c.m1", Name: "counters", Type: "pkg.Counter", Dims: Dims{{"gpus", 2}}, Ranks: []int{1}, Args: args, Owner: "c"}},
		{wire.OpStop, &stopReq{Mesh: "c.m1"}},
		{wire.OpRestart, &restartReq{Mesh: "c.m1", Ranks: []int{0, 3}, Cause: "c.m1[0] failed: boom"}},
		{wire.OpRestart, &restartReq{Mesh: "c.m1", Ranks: []int{1}, GiveUp: "3 restarts in 1m0s"}},
		{wire.OpRestart, &restartReq{Mesh: "c.m1", Ranks: []int{1, 2}, GiveUp: "its host is gone; its mesh goes on without it", Missing: true}},
		{wire.OpGone, &wire.GoneNotice{Proc: "c-1", Reason: "killed by SIGKILL", Stopped: false}},
		{wire.OpGone, &wire.GoneNotice{Proc: "c-1", Reason: "exited with status 1 (host h0)", Status: 1, At: 1_800_000_000_123_456_789}},
		{wire.OpGone, &wire.GoneNotice{Proc: "c-1", Reason: "exited with status 1 (host h0)", Status: 1, At: 1_800_000_000_123_456_789, ErrAt: 1_800_000_000_100_000_000}},
		{wire.OpReplaced, &wire.ReplacedNotice{Old: "c-1", New: "c-5", Agent: "c", Host: "h0", PID: 4242}},
		{wire.OpPortGone, &wire.PortGone{ID: 12}},
		{wire.OpSpawnProcs, &wire.SpawnProcsReq{IDs: []string{"c-1", "c-2"}, Ranks: []int{0, 1}, Env: [][]string{{"A=1"}, {"A=2"}}, Proc: "c", Port: 4}},
		{wire.OpSpawnProcs, &wire.SpawnProcsReq{IDs: []string{"c-1"}, Ranks: []int{0}, Env: [][]string{nil}, Proc: "c", Port: 4,
			Command: []string{"python3", "train.py"}, Wrap: [][]string{{"numactl", "-N", "0"}}, CPUs: [][]int{{0, 1}}}},
		{wire.OpRespawnProc, &wire.RespawnProcReq{Old: "c-1", New: "c-5", Proc: "c", Port: 4}},
		{wire.OpRespawnProc, &wire.RespawnProcReq{Old: "h2.c-1", New: "h1.c-5", Proc: "c", Port: 4,
			Adopt: &wire.AdoptSlot{Mesh: "train", Rank: 3, Env: []string{"RANK=3"}, CPUs: []int{0, 1}}}},
		{wire.OpSpawnProcs, &wire.SpawnProcsReq{IDs: []string{"c-1"}, Ranks: []int{0}, Env: [][]string{{"RANK=0"}}, Proc: "c", Port: 4, Spares: 2}},
		{wire.OpTakeSlot, &wire.TakeSlotReq{Env: []string{"RANK=1", "MONARCH_RANK_GPUS=1", "EMPTY="}, Proc: "c", Port: 4}},
		{wire.OpSlotTaken, nil},
		{wire.OpStopProcs, &wire.StopProcsReq{IDs: []string{"c-1"}, Rank: 0}},
		{wire.OpStopProcs, &wire.StopProcsReq{IDs: []string{"c-1"}, Rank: 0, GraceMS: 60000}},
		{wire.OpFreePort, nil},
		{wire.OpSyncLogs, &wire.StopProcsReq{IDs: []string{"c-1"}, Rank: 1}},
		{wire.OpFailure, &MeshFailure{Mesh: "w", MeshID: "c.m3", ActorID: "w[1]", Proc: "c-2", Reason: "Step error: x", Dims: Dims{{"gpus", 2}}, Coords: []int{1}, Base: 1,
			Err: &ActorError{ActorID: "w[1]", Proc: "c-2", Endpoint: "Step", Message: "x"}}},
		{wire.OpFailure, &MeshFailure{Mesh: "w", MeshID: "c.m3", ActorID: "w[0]", Proc: "c-1", Reason: "boom; its mesh goes on without it", Dims: Dims{{"gpus", 2}}, Coords: []int{0}, GoesOn: true}},
		{wire.OpHeartbeat, nil},
		{wire.OpAgentsHello, nil},
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
		fr := &wire.Frame{Header: wire.Header{Kind: wire.KindControl, Method: op, Port: port, ReplyTo: replyTo, Rank: -1}, Payload: body}
		var got any
		var err error
		n := alloc.By(func() { got, _, err = readControl(fr) })
		if limit := uint64(64*len(body)) + alloc.Slack; n > limit {
			t.Fatalf("a body of %d bytes allocated %d", len(body), n)
		}
		if err != nil {
			return
		}
		again, err := msgpack.Marshal(got)
		if err != nil {
			t.Fatalf("accepted %T cannot be written again: %v", got, err)
		}
		fr.Payload = again
		got2, _, err := readControl(fr)
		if err != nil {
			t.Fatalf("accepted %T refused once written again: %v", got, err)
		}
		if !reflect.DeepEqual(got, got2) {
			t.Fatalf("written again: %+v, want %+v", got2, got)
		}
	})
}

// FuzzNotice: a notice off the wire decodes or fails, within its bounds.
func FuzzNotice(f *testing.F) {
	for _, n := range []PreemptNotice{{Reason: "time limit"}, {Reason: "stop requested (SIGTERM)", Deadline: time.Unix(1, 2), Stop: true}} {
		b, err := encodeNotice(n)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		n, err := decodeNotice(data)
		if err != nil {
			return
		}
		if len(n.Reason) > maxNoticeReason {
			t.Fatalf("a reason of %d bytes", len(n.Reason))
		}
		b, err := encodeNotice(n)
		if err != nil {
			t.Fatal(err)
		}
		if again, err := decodeNotice(b); err != nil || again != n {
			t.Fatalf("%+v encoded and decoded again: %+v, %v", n, again, err)
		}
	})
}

// FuzzValueMesh reads a ValueMesh off the wire: no panic, an allocation
// bounded by the input's length, and one that is accepted is accepted
// again, the same, once written again (its missing marks too).
func FuzzValueMesh(f *testing.F) {
	ext, _ := NewExtent(Dims{{"hosts", 2}, {"gpus", 2}})
	for _, v := range []ValueMesh[int]{
		{},
		{ext: ext, vals: []int{1, 2, 3, 4}},
		{ext: ext, vals: []int{1, 0, 3, 0}, missing: []bool{false, true, false, true}},
		{ext: ext, vals: []int{0, 0, 0, 0}, missing: []bool{true, true, true, true}},
	} {
		b, err := msgpack.Marshal(wireValueMesh[int]{v})
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var v ValueMesh[int]
		var err error
		// As the runtime reads a payload: checked first, then decoded.
		n := alloc.By(func() { err = wire.DecodePayload(data, nil, func(d *msgpack.Decoder) error { return v.decodeWire(d) }) })
		if limit := uint64(64*len(data)) + alloc.Slack; n > limit {
			t.Fatalf("%d bytes allocated %d", len(data), n)
		}
		if err != nil {
			return
		}
		b, err := msgpack.Marshal(wireValueMesh[int]{v})
		if err != nil {
			t.Fatalf("accepted %v cannot be written again: %v", v, err)
		}
		var again ValueMesh[int]
		if err := wire.DecodePayload(b, nil, func(d *msgpack.Decoder) error { return again.decodeWire(d) }); err != nil {
			t.Fatalf("accepted %v refused once written again: %v", v, err)
		}
		if !reflect.DeepEqual(v.Missing(), again.Missing()) || !reflect.DeepEqual(v.Values(), again.Values()) || !v.Extent().Equal(again.Extent()) {
			t.Fatalf("written again: %v, want %v", again, v)
		}
	})
}

// wireValueMesh writes its ValueMesh as the runtime does.
type wireValueMesh[T any] struct{ v ValueMesh[T] }

func (w wireValueMesh[T]) EncodeMsgpack(e *msgpack.Encoder) error { return w.v.encodeWire(e) }

// FuzzMeshInfo reads an owner's answer about where a mesh's members are
// (what refreshMoves takes): no panic, an allocation bounded by the
// input, and the moved and missing members it accepts are ranks of the
// mesh.
func FuzzMeshInfo(f *testing.F) {
	for _, info := range []meshInfo{
		{Procs: []string{"c-1", "c-2"}, Agents: []string{"c", "c"}},
		{Procs: []string{"c-1", "c-2"}, Agents: []string{"c", "c"}, Moved: []movedWire{{Rank: 1, Proc: "c-3", Agent: "c"}}},
		{Procs: []string{"c-1", "c-2"}, Agents: []string{"c", "c"}, Missing: []missingWire{{Rank: 0, Why: "its host is gone"}}},
	} {
		b, err := msgpack.Marshal(&info)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var info meshInfo
		var err error
		n := alloc.By(func() { err = wire.DecodePayload(data, nil, func(d *msgpack.Decoder) error { return d.Decode(&info) }) })
		if limit := uint64(64*len(data)) + alloc.Slack; n > limit {
			t.Fatalf("%d bytes allocated %d", len(data), n)
		}
		if err != nil || checkMoved(info.Moved, len(info.Procs)) != nil || checkMissing(info.Missing, len(info.Procs)) != nil {
			return
		}
		var ref meshRef
		ref.setMissing(info.Missing)
		for _, w := range ref.missingWire() {
			if w.Rank < 0 || w.Rank >= len(info.Procs) {
				t.Fatalf("missing rank %d of %d accepted", w.Rank, len(info.Procs))
			}
		}
	})
}
