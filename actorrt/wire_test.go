package actorrt

import (
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/monarch-go/monarch/bus"
	"github.com/monarch-go/monarch/internal/wire"

	"github.com/vmihailenco/msgpack/v5"
)

// TestRegionTravels: a sliced region sent in a header is the same region
// once the receiver joins it to the mesh's base extent.
func TestRegionTravels(t *testing.T) {
	base, _ := NewExtent(Dims{{"hosts", 2}, {"gpus", 4}})
	sliced, _ := wholeRegion(base).slice("gpus", 1, 3)
	atHost, _ := sliced.at("hosts", 1)
	for _, want := range []region{sliced, atHost} {
		h := wire.Header{Kind: wire.KindActor, Target: "c.m1", Method: "Step", Rank: -1, Region: want.appendWire(nil)}
		w, err := wire.NewFrame(&h, bus.DefaultMaxMessage)
		if err != nil {
			t.Fatal(err)
		}
		f, err := wire.Parse(append([]byte(nil), w.Bytes()...))
		w.Free()
		if err != nil {
			t.Fatal(err)
		}
		r, err := wireRegion(f.Region).toRegion(base)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(r, want) {
			t.Errorf("region %+v, want %+v", r, want)
		}
	}
}

// TestWireRegionRejected: a region that does not fit the mesh is refused
// as undecodable.
func TestWireRegionRejected(t *testing.T) {
	base, _ := NewExtent(Dims{{"gpus", 4}})
	// Past the end, not in threes, negative, overlapping the end, and a
	// kept flag other than 0 or 1.
	for _, wr := range []wireRegion{{0, 5, 1}, {0, 1}, {-1, 2, 1}, {3, 2, 1}, {0, 2, 48}} {
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

// TestErrorReplyReads: an error reply as a host agent writes it
// (wire.ErrorReply) reads as the same error, sentinel included.
func TestErrorReplyReads(t *testing.T) {
	for _, sent := range []error{
		fmt.Errorf("%w: start proc c-1: no such file", ErrProcFailed),
		fmt.Errorf("%w: stopprocs: body: short", ErrDecode),
		errors.New("no sentinel"),
	} {
		h := wire.Header{Kind: wire.KindPort, Port: 3, Rank: 0, Flags: wire.FlagError, ReplyTo: "h0"}
		w, err := wire.NewFrame(&h, bus.DefaultMaxMessage)
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Enc.Encode(wire.NewErrorReply(sent)); err != nil {
			t.Fatal(err)
		}
		f, err := wire.Parse(append([]byte(nil), w.Bytes()...))
		w.Free()
		if err != nil {
			t.Fatal(err)
		}
		got := decodeReply((*core)(nil), &f, new(int))
		if got == nil || got.Error() != sent.Error() {
			t.Errorf("%q came back as %v", sent, got)
		}
		for _, s := range []error{ErrProcFailed, ErrDecode, ErrStopped} {
			if errors.Is(sent, s) != errors.Is(got, s) {
				t.Errorf("%q: errors.Is(%v) changed in transit", sent, s)
			}
		}
	}
}
