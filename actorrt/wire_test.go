package actorrt

import (
	"bytes"
	"errors"
	"reflect"
	"testing"

	"github.com/monarch-go/monarch/bus"

	"github.com/vmihailenco/msgpack/v5"
)

func TestFrameRoundTrip(t *testing.T) {
	base, _ := NewExtent(Dims{{"hosts", 2}, {"gpus", 4}})
	sliced, _ := wholeRegion(base).slice("gpus", 1, 3)
	atHost, _ := sliced.at("hosts", 1)
	big := bytes.Repeat([]byte{7}, 3<<20)
	tests := []struct {
		name    string
		h       header
		payload []any
	}{
		{"call whole mesh", header{kind: kindActor, target: "c.m1", method: "GetValue", port: 9, replyTo: "c", rank: -1}, nil},
		{"call slice", header{kind: kindActor, target: "c.m1", method: "Step", rank: -1, region: &atHost}, []any{"x", 3}},
		{"port reply", header{kind: kindPort, port: 1 << 40, rank: 7, flags: flagError}, []any{map[string]int{"a": 1}}},
		{"big payload", header{kind: kindActor, target: "m", method: "Load", rank: -1}, []any{big}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w, err := newFrame(&tt.h, bus.DefaultMaxMessage)
			if err != nil {
				t.Fatal(err)
			}
			if err := w.enc.Encode(tt.payload); err != nil {
				t.Fatal(err)
			}
			data := append([]byte(nil), w.bytes()...)
			w.free()
			f, err := parseFrame(data)
			if err != nil {
				t.Fatal(err)
			}
			got := f.h
			got.region = nil
			want := tt.h
			want.region = nil
			if got != want {
				t.Errorf("header %+v, want %+v", got, want)
			}
			if tt.h.region == nil {
				if f.region != nil {
					t.Errorf("region %v, want none", f.region)
				}
			} else {
				r, err := f.region.toRegion(base)
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(r, *tt.h.region) {
					t.Errorf("region %+v, want %+v", r, *tt.h.region)
				}
			}
			var payload []any
			if err := msgpack.Unmarshal(f.payload, &payload); err != nil {
				t.Fatal(err)
			}
			if len(payload) != len(tt.payload) {
				t.Fatalf("payload %d values, want %d", len(payload), len(tt.payload))
			}
			// The payload is a view into the received bytes, not a copy.
			if len(f.payload) > 0 && &f.payload[len(f.payload)-1] != &data[len(data)-1] {
				t.Error("payload was copied")
			}
		})
	}
}

func TestParseFrameRejectsGarbage(t *testing.T) {
	for _, data := range [][]byte{nil, {0, 0}, {0, 0, 0, 9, 1}, {0, 0, 0, 1, 0xc1}} {
		if _, err := parseFrame(data); !errors.Is(err, ErrDecode) {
			t.Errorf("parseFrame(%v) = %v, want ErrDecode", data, err)
		}
	}
	base, _ := NewExtent(Dims{{"gpus", 4}})
	for _, wr := range []wireRegion{{0, 5, 1}, {0, 1}, {-1, 2, 1}, {3, 2, 1}} {
		if _, err := wr.toRegion(base); !errors.Is(err, ErrDecode) {
			t.Errorf("toRegion(%v) = %v, want ErrDecode", wr, err)
		}
	}
}

func TestErrorsTravel(t *testing.T) {
	ae := &ActorError{ActorID: "a[1]", Proc: "c-1", Endpoint: "Boom", Code: CodePanic, Message: "x", Stack: "stack"}
	for _, err := range []error{ae, ErrNotOne, errors.Join(errors.New("ctx"), ErrStopped)} {
		we := toWireError(err)
		b, _ := msgpack.Marshal(&we)
		var back wireError
		if err := msgpack.Unmarshal(b, &back); err != nil {
			t.Fatal(err)
		}
		got := back.toError()
		if got.Error() != err.Error() {
			t.Errorf("%q came back as %q", err, got)
		}
		for _, s := range []error{ErrNotOne, ErrStopped, ErrPanic} {
			if errors.Is(err, s) != errors.Is(got, s) {
				t.Errorf("%q: errors.Is(%v) changed in transit", err, s)
			}
		}
	}
}
