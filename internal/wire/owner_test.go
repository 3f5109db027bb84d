package wire

import (
	"bytes"
	"reflect"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
)

// ownedValue reads the owner of the decoder that decodes it, as a mesh
// reference does.
type ownedValue struct {
	owner any
	v     any
}

func (o *ownedValue) DecodeMsgpack(d *msgpack.Decoder) error {
	o.owner = Owner(d)
	var err error
	o.v, err = d.DecodeInterface()
	return err
}

// TestOwner: a value decoded by DecodePayloadFor finds the owner it was
// given, nested in a slice too; one decoded by DecodePayload, or by a
// decoder made elsewhere, finds none.
func TestOwner(t *testing.T) {
	b, err := msgpack.Marshal([]any{1, "x"})
	if err != nil {
		t.Fatal(err)
	}
	owner := &struct{ name string }{"rt"}
	var got []ownedValue
	err = DecodePayloadFor(owner, b, []reflect.Type{reflect.TypeOf(got)}, func(d *msgpack.Decoder) error { return d.Decode(&got) })
	if err != nil || len(got) != 2 || got[0].owner != owner || got[1].owner != owner {
		t.Fatalf("DecodePayloadFor: %+v, %v; want both owned by %p", got, err, owner)
	}
	got = nil
	if err := DecodePayload(b, nil, func(d *msgpack.Decoder) error { return d.Decode(&got) }); err != nil || got[0].owner != nil {
		t.Fatalf("DecodePayload: %+v, %v; want no owner", got, err)
	}
	got = nil
	if err := msgpack.NewDecoder(bytes.NewReader(b)).Decode(&got); err != nil || got[0].owner != nil {
		t.Fatalf("a decoder of its own: %+v, %v; want no owner", got, err)
	}
}

// FuzzDecodePayloadFor: the decoder that carries an owner reads any bytes
// as DecodePayload's does (the same value or the same error), and every
// value decoded finds the owner.
func FuzzDecodePayloadFor(f *testing.F) {
	for _, v := range []any{nil, 1, "s", []any{1, "a", []any{nil}}, map[string]any{"a": 1}, []byte{1, 2}} {
		b, err := msgpack.Marshal(v)
		if err != nil {
			panic(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		owner := new(int)
		var plain, owned ownedValue
		types := []reflect.Type{reflect.TypeOf(plain)}
		errPlain := DecodePayload(b, types, func(d *msgpack.Decoder) error { return d.Decode(&plain) })
		errOwned := DecodePayloadFor(owner, b, types, func(d *msgpack.Decoder) error { return d.Decode(&owned) })
		if (errPlain == nil) != (errOwned == nil) || errPlain != nil && errPlain.Error() != errOwned.Error() {
			t.Fatalf("DecodePayload: %v; DecodePayloadFor: %v", errPlain, errOwned)
		}
		if errOwned != nil {
			return
		}
		// (A nil is decoded as the zero value: no decoder of its own runs.)
		if owned.owner != owner && b[0] != 0xc0 || plain.owner != nil {
			t.Fatalf("owners %v and %v", plain.owner, owned.owner)
		}
		if !reflect.DeepEqual(plain.v, owned.v) {
			t.Fatalf("decoded %#v and %#v", plain.v, owned.v)
		}
	})
}
