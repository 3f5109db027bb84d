package actorrt_test

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/monarch-go/monarch/actorrt"
	"github.com/vmihailenco/msgpack/v5"
)

// Sealed has only unexported fields: it crosses the wire by the codec
// RegisterCodec gives it, with no exported method of its own.
type Sealed struct {
	name  string
	count int
}

// Unsealed has the same fields and no codec: Register refuses it.
type Unsealed struct {
	name string
}

// SealEcho sends a Sealed back changed, from its proc.
type SealEcho struct{}

func (*SealEcho) Bump(ctx *actorrt.Context, s Sealed) (Sealed, error) {
	return Sealed{name: s.name + "!", count: s.count + 1}, nil
}

// Loses would take an Unsealed, which would arrive empty.
type Loses struct{}

func (*Loses) Take(ctx *actorrt.Context, u Unsealed) error { return nil }

func init() {
	actorrt.RegisterCodec(
		func(e *msgpack.Encoder, s Sealed) error { return e.Encode([]any{s.name, s.count}) },
		func(d *msgpack.Decoder, s *Sealed) error {
			var f struct {
				_msgpack struct{} `msgpack:",as_array"`
				Name     string
				Count    int
			}
			if err := d.Decode(&f); err != nil {
				return err
			}
			*s = Sealed{name: f.Name, count: f.Count}
			return nil
		})
	if err := actorrt.Register[SealEcho](); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
}

// TestRegisterCodec: a type with a codec of functions passes the wire
// check and arrives intact in another proc and back, alone and inside a
// slice and a map; the same type without one is refused at Register.
func TestRegisterCodec(t *testing.T) {
	inProcess(t)
	ctx := testCtx(t)
	procs := spawnProcs(t, actorrt.Dims{{"gpus", 2}})
	m := spawn[SealEcho](t, procs, "seal-echo")
	got, err := actorrt.Method1((*SealEcho).Bump).CallOne(m.At("gpus", 1), Sealed{name: "a", count: 41}).Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got != (Sealed{name: "a!", count: 42}) {
		t.Fatalf("got %+v", got)
	}
	// Inside a slice and a map, as msgpack sends them anywhere.
	in := map[string][]Sealed{"k": {{"x", 1}, {"y", 2}}}
	b, err := msgpack.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	var back map[string][]Sealed
	if err := msgpack.Unmarshal(b, &back); err != nil || fmt.Sprint(back) != fmt.Sprint(in) {
		t.Fatalf("%v came back as %v, %v", in, back, err)
	}
	err = actorrt.Register[Loses]()
	if err == nil || !strings.Contains(err.Error(), "field Unsealed.name (string) is unexported") || !strings.Contains(err.Error(), "RegisterCodec") {
		t.Fatalf("Register of an endpoint taking Unsealed: %v", err)
	}
}
