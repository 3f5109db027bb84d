package dtensor

import (
	"reflect"
	"strings"
	"testing"

	"github.com/monarch-go/monarch/collective"
	"github.com/monarch-go/monarch/ibverbs"
	"github.com/monarch-go/monarch/internal/wire"
	"github.com/vmihailenco/msgpack/v5"
)

// An op crosses the wire as it was, every field set or none; a payload
// cut short, or an array of another length, is an error, not a panic.
func TestOpWire(t *testing.T) {
	if n := reflect.TypeFor[op]().NumField(); n != opFields {
		t.Fatalf("op has %d fields, its wire form %d: EncodeMsgpack and DecodeMsgpack must write and read every one", n, opFields)
	}
	full := op{
		Kind: "grad", Out: 1<<63 + 5, In: []uint64{1, 2}, Shape: []int{3, -4}, Seed: 9, Rank: -2, Index: 7, Value: -0.25,
		Name: "mean", Mesh: []byte{0x92, 1, 2}, Dims: []string{"procs", "gpus"},
		Comm:   &collective.Comm{ID: "comm-1", Handles: []ibverbs.Handle{{Size: 8, Key: 3, Boot: "b", PID: 4, FD: 5}}, SlotBytes: 64},
		CommID: "comm-1", Graph: []gradNode{{}, {Kind: "relu", In: []int{0}, Shape: []int{2}}}, Wrt: []int{0}, Leaves: []uint64{11},
		Handle: &ibverbs.Handle{Size: 16, Addr: "h:1"}, DType: Float32, Raw: []byte{0, 1, 2}, Hyper: []float64{0.1, 0.9},
		Defer: []op{{Kind: "relu", Out: 3, In: []uint64{2}}},
	}
	for _, o := range []op{{}, {Kind: "drop", In: []uint64{}}, full} {
		b, err := msgpack.Marshal(o)
		if err != nil {
			t.Fatal(err)
		}
		var got op
		if err := msgpack.Unmarshal(b, &got); err != nil {
			t.Fatalf("%+v: %v", o, err)
		}
		if !reflect.DeepEqual(got, o) {
			t.Fatalf("sent %+v, got %+v", o, got)
		}
		for n := range len(b) {
			if err := msgpack.Unmarshal(b[:n], &got); err == nil {
				t.Fatalf("%d of %d bytes decoded", n, len(b))
			}
		}
	}
	nested := full
	nested.Defer = []op{{Kind: "grad", Defer: []op{{Kind: "relu"}}}}
	b, err := msgpack.Marshal(nested)
	if err != nil {
		t.Fatal(err)
	}
	if err := msgpack.Unmarshal(b, new(op)); err == nil || !strings.Contains(err.Error(), "deferred ops within deferred ops") {
		t.Fatalf("deferred ops nested twice: %v", err)
	}
	b, _ = msgpack.Marshal([]any{"relu", 1})
	if err := msgpack.Unmarshal(b, new(op)); err == nil || !strings.Contains(err.Error(), "an op of 2 fields") {
		t.Fatalf("an array of 2: %v", err)
	}
}

// FuzzBatchWire: whatever bytes arrive as a batch of ops, decoding ends
// with ops or an error, never a panic; what decodes encodes again to
// the same ops.
func FuzzBatchWire(f *testing.F) {
	for _, b := range []batch{nil, {}, {{Kind: "relu", Out: 2, In: []uint64{1}}}, {{Kind: "grad", Graph: []gradNode{{Kind: "relu", In: []int{0}}}, Defer: []op{{Kind: "mul", In: []uint64{1, 2}}}}}} {
		raw, err := msgpack.Marshal(b)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(raw)
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		var b batch
		if err := msgpack.Unmarshal(raw, &b); err != nil {
			return
		}
		again, err := msgpack.Marshal(b)
		if err != nil {
			t.Fatalf("%+v decoded but does not encode: %v", b, err)
		}
		var b2 batch
		if err := msgpack.Unmarshal(again, &b2); err != nil || !reflect.DeepEqual(b, b2) {
			t.Fatalf("%+v encodes to what decodes to %+v, %v", b, b2, err)
		}
	})
}

// TestRRefMeshChecked: an rref op's actor mesh travels in line, so the
// check every call's arguments get on arrival (wire.CheckMsgpack) walks
// its lengths too: one that claims more than the payload holds is
// refused before anything decodes it, as a length anywhere else in a
// batch is.
func TestRRefMeshChecked(t *testing.T) {
	for _, tt := range []struct {
		name string
		mesh []byte
		ok   bool
	}{
		{"a mesh", []byte{0x92, 0xa1, 'a', 0x01}, true},
		{"an array claiming 2^30 elements", []byte{0xdd, 0x40, 0, 0, 0}, false},
		{"a string claiming 1 GiB", []byte{0xdb, 0x40, 0, 0, 0}, false},
	} {
		b, err := msgpack.Marshal(batch{{Kind: "rref", Name: "f", Mesh: tt.mesh}, {Kind: "drop", In: []uint64{1}}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := wire.CheckMsgpack(b); (err == nil) != tt.ok {
			t.Errorf("%s: the arrival check says %v, want ok=%v", tt.name, err, tt.ok)
		}
	}
}
