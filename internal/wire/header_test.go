package wire

import (
	"bytes"
	"encoding/binary"
	"errors"
	"reflect"
	"testing"

	"github.com/monarch-go/monarch/bus"

	"github.com/vmihailenco/msgpack/v5"
)

func TestFrameRoundTrip(t *testing.T) {
	// hosts=2, gpus=4 sliced to gpus 1:3, then indexed at hosts=1.
	atHost := []int{1, 1, 0, 1, 2, 1}
	big := bytes.Repeat([]byte{7}, 3<<20)
	tests := []struct {
		name    string
		h       Header
		payload []any
	}{
		{"call whole mesh", Header{Kind: KindActor, Target: "c.m1", Method: "GetValue", Port: 9, ReplyTo: "c", Rank: -1}, nil},
		{"call slice", Header{Kind: KindActor, Target: "c.m1", Method: "Step", Rank: -1, Region: atHost}, []any{"x", 3}},
		{"port reply", Header{Kind: KindPort, Port: 1 << 40, Rank: 7, Flags: FlagError}, []any{map[string]int{"a": 1}}},
		{"big payload", Header{Kind: KindActor, Target: "m", Method: "Load", Rank: -1}, []any{big}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w, err := NewFrame(&tt.h, bus.DefaultMaxMessage)
			if err != nil {
				t.Fatal(err)
			}
			if err := w.Enc.Encode(tt.payload); err != nil {
				t.Fatal(err)
			}
			data := append([]byte(nil), w.Bytes()...)
			w.Free()
			f, err := Parse(data)
			if err != nil {
				t.Fatal(err)
			}
			got := f.Header
			got.Region = nil
			want := tt.h
			want.Region = nil
			if !reflect.DeepEqual(got, want) {
				t.Errorf("header %+v, want %+v", got, want)
			}
			if tt.h.Region == nil {
				if f.Region != nil {
					t.Errorf("region %v, want none", f.Region)
				}
			} else if !reflect.DeepEqual(f.Region, tt.h.Region) {
				t.Errorf("region %v, want %v", f.Region, tt.h.Region)
			}
			var payload []any
			if err := msgpack.Unmarshal(f.Payload, &payload); err != nil {
				t.Fatal(err)
			}
			if len(payload) != len(tt.payload) {
				t.Fatalf("payload %d values, want %d", len(payload), len(tt.payload))
			}
			// The payload is a view into the received bytes, not a copy.
			if len(f.Payload) > 0 && &f.Payload[len(f.Payload)-1] != &data[len(data)-1] {
				t.Error("payload was copied")
			}
		})
	}
}

func TestParseRejectsGarbage(t *testing.T) {
	for _, data := range [][]byte{nil, {0, 0}, {0, 0, 0, 9, 1}, {0, 0, 0, 1, 0xc1}} {
		if _, err := Parse(data); !errors.Is(err, ErrDecode) {
			t.Errorf("Parse(%v) = %v, want ErrDecode", data, err)
		}
	}
}

// checkCommonForm: where the header of frame data is in the common form,
// the general reader reads it too, as the same header.
func checkCommonForm(t *testing.T, data []byte) {
	t.Helper()
	if len(data) < 4 {
		return
	}
	n := int(binary.BigEndian.Uint32(data))
	if n > len(data)-4 {
		return
	}
	var common, general Header
	if !common.readCommon(data[4 : 4+n]) {
		return
	}
	if err := general.readAny(data[4 : 4+n]); err != nil || !reflect.DeepEqual(common, general) {
		t.Fatalf("header %x: read as %+v, the general way as %+v (%v)", data[4:4+n], common, general, err)
	}
}

// TestHeaderCommonForm: the headers of most frames take the fast path,
// the others the general one, with the same result either way.
func TestHeaderCommonForm(t *testing.T) {
	long := string(bytes.Repeat([]byte{'n'}, 32))
	for _, tt := range []struct {
		h      Header
		common bool
	}{
		{Header{Kind: KindActor, Target: "c.m1", Method: "Hit", Rank: -1}, true},
		{Header{Kind: KindActor, Target: "c.m1", Method: "Ping", Port: 9, ReplyTo: "c", Rank: -1}, true},
		{Header{Kind: KindPort, Port: 1<<32 - 1, ReplyTo: "c-3", Rank: 127, Flags: FlagError | FlagLast}, true},
		{Header{Kind: KindPort, Port: 300, ReplyTo: "c-3", Rank: 5}, true},
		{Header{Kind: KindControl, Method: OpStop, ReplyTo: "c", Rank: -1}, true},
		{Header{Kind: KindPort, Port: 1 << 32, ReplyTo: "c", Rank: 0}, false},
		{Header{Kind: KindPort, Port: 1, ReplyTo: "c", Rank: 128}, false},
		{Header{Kind: KindActor, Target: long, Method: "Hit", Rank: -1}, false},
		{Header{Kind: KindActor, Target: "m", Method: "Hit", Rank: -1, Region: []int{0, 2, 1}}, false},
	} {
		w, err := NewFrame(&tt.h, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		data := append(append([]byte(nil), w.Bytes()...), 0x90)
		w.Free()
		var h Header
		if got := h.readCommon(data[4 : len(data)-1]); got != tt.common {
			t.Errorf("%+v: common form %v, want %v", tt.h, got, tt.common)
		}
		checkCommonForm(t, data)
		f, err := Parse(data)
		if err != nil || !reflect.DeepEqual(f.Header, tt.h) {
			t.Errorf("%+v: parsed as %+v (%v)", tt.h, f.Header, err)
		}
	}
}
