package actorrt

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log"
	"reflect"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/monarch-go/monarch/actorrt/internal/wirecheck"
)

// Types for the wire check, each a way msgpack keeps or loses a value.
type (
	wcPlain struct {
		A  int
		B  string
		C  []float64
		D  map[string][]int
		E  *wcPlain
		F  [2]bool
		G  time.Duration
		_  int // padding: holds nothing anyone can read
		Hs []wcKey
	}
	wcKey  struct{ X, Y int }
	wcSkip struct {
		Name   string
		secret int `msgpack:"-"`
	}
	inner         struct{ Level, secret int }
	wcPublicInner struct{ X, Y int }
	wcConfig      struct {
		Name string
		inner
	}
	wcEmbedOK struct {
		wcPublicInner // unexported type embedded: its exported fields are inlined
		Z             int
	}
	wcShadowFirst struct { // the outer X first: msgpack sends the inner struct whole
		X int
		wcPublicInner
	}
	wcShadowAfter struct { // the outer X after: two fields sent as "X"
		wcPublicInner
		X int
	}
	wcInlineShadow struct {
		X             int
		wcPublicInner `msgpack:",inline"`
	}
	wcDupTag struct {
		A int `msgpack:"x"`
		B int `msgpack:"x"`
	}
	wcAsArray struct {
		_msgpack struct{} `msgpack:",as_array"`
		A        int      `msgpack:"x"`
		B        int      `msgpack:"x"`
	}
	wcSecretInt int
	wcEmbedInt  struct {
		wcSecretInt
		Z int
	}
	wcEmbedPtr struct {
		*wcPublicInner
		Z int
	}
	WCPublic      struct{ X, Y int }
	wcEmbedPubPtr struct {
		*WCPublic
		Z int
	}
	wcEmbedPubPtrNoInline struct {
		*WCPublic `msgpack:",noinline"`
		Z         int
	}
	wcPtrKey    struct{ P *int }
	wcInlinePtr struct {
		*WCPublic `msgpack:",inline"`
		Z         int
	}
	wcInternInt struct {
		N int `msgpack:",intern"`
	}

	// Types with codecs of their own.
	wcOwnCodec   struct{ secret int }
	wcPtrCodec   struct{ X int } // codec on *wcPtrCodec only
	wcHalf       struct{ secret int }
	wcMixed      struct{ secret int }
	wcCodec      struct{ X int }
	wcLendsCodec struct { // gets wcCodec's methods, which send only it
		wcCodec
		Z int
	}
	wcUnexportedCodec struct {
		wcCodec2
		Z int
	}
	wcCodec2  struct{ X int }
	wcStamped struct {
		time.Time
		Name string
	}
	wcOverrides struct { // embeds a codec type but has its own codec
		wcCodec
		Z int
	}
	wcHoldsPtrCodec struct{ P wcPtrCodec }
)

func (c wcOwnCodec) EncodeMsgpack(e *msgpack.Encoder) error { return e.EncodeInt(int64(c.secret)) }
func (c *wcOwnCodec) DecodeMsgpack(d *msgpack.Decoder) error {
	v, err := d.DecodeInt()
	c.secret = v
	return err
}
func (c *wcPtrCodec) EncodeMsgpack(e *msgpack.Encoder) error { return e.EncodeInt(int64(c.X)) }
func (c *wcPtrCodec) DecodeMsgpack(d *msgpack.Decoder) error {
	v, err := d.DecodeInt()
	c.X = v
	return err
}
func (c wcHalf) EncodeMsgpack(e *msgpack.Encoder) error  { return e.EncodeInt(int64(c.secret)) }
func (c wcMixed) MarshalText() ([]byte, error)           { return []byte("x"), nil }
func (c *wcMixed) UnmarshalBinary(b []byte) error        { return nil }
func (c wcCodec) EncodeMsgpack(e *msgpack.Encoder) error { return e.EncodeInt(int64(c.X)) }
func (c *wcCodec) DecodeMsgpack(d *msgpack.Decoder) error {
	v, err := d.DecodeInt()
	c.X = v
	return err
}
func (c wcCodec2) EncodeMsgpack(e *msgpack.Encoder) error { return e.EncodeInt(int64(c.X)) }
func (c *wcCodec2) DecodeMsgpack(d *msgpack.Decoder) error {
	v, err := d.DecodeInt()
	c.X = v
	return err
}
func (o wcOverrides) EncodeMsgpack(e *msgpack.Encoder) error { return e.EncodeMulti(o.X, o.Z) }
func (o *wcOverrides) DecodeMsgpack(d *msgpack.Decoder) error {
	return d.DecodeMulti(&o.X, &o.Z)
}

type wcActor struct{}

// TestWireCheck: the check refuses exactly the types that do not survive
// a trip through msgpack. For a type without a codec of its own, what the
// check says is compared with what a real trip does to a value with every
// field set (and to one with every pointer, slice and map nil).
// wcWeights and wcBlocks hold numeric blocks: a named slice, fields.
type wcWeights []float32

type wcBlocks struct {
	W     wcWeights
	G     []float64
	Mask  []bool
	Shape [2]uint16
	Acts  []int8
}

func TestWireCheck(t *testing.T) {
	// msgpack logs the duplicate names some of these types have.
	w := log.Writer()
	log.SetOutput(io.Discard)
	defer log.SetOutput(w)
	tests := []struct {
		v       any    // a value of the type
		mention string // "" if the type travels; else part of the problem
		codec   bool   // has a codec: the trip is its own business
	}{
		{v: 0},
		{v: ""},
		{v: []byte{}},
		{v: [4]byte{}},
		{v: [2][3]string{}},
		{v: map[[2]int]string{}},
		{v: map[wcKey]bool{}},
		{v: new(**int)},
		{v: wcPlain{}},
		{v: []*wcPlain{}},
		{v: wcSkip{}},
		{v: wcEmbedOK{}},
		{v: wcShadowFirst{}},
		{v: wcAsArray{}},
		{v: wcEmbedPubPtrNoInline{}},
		{v: []wcPtrCodec{}},
		{v: &wcPtrCodec{}},
		{v: []wcHoldsPtrCodec{}},
		{v: wcOwnCodec{}, codec: true},
		{v: wcOverrides{}, codec: true},
		{v: time.Time{}, codec: true},
		{v: msgpack.RawMessage{}, codec: true},
		{v: []float32{}}, // numeric blocks (internal/wire, blocks.go)
		{v: wcWeights{}},
		{v: [3]int64{}},
		{v: wcBlocks{}},
		{v: map[string][]float64{}},

		{v: struct {
			Name   string
			secret int
		}{}, mention: "field secret (int) is unexported, so it would arrive as its zero value: export it, tag it `msgpack:\"-\"` to leave it out, or make it a named type with a msgpack codec"},
		{v: struct{ a, b int }{}, mention: "field a (int) is unexported"},
		{v: wcConfig{}, mention: "field wcConfig.inner.secret (int) is unexported, so it would arrive as its zero value: export it, tag it `msgpack:\"-\"` to leave it out, or give wcConfig a msgpack codec"},
		{v: []map[string]wcConfig{}, mention: "field wcConfig.inner.secret"},
		{v: struct{ C []wcConfig }{}, mention: "field C[i].inner.secret"},
		{v: wcShadowAfter{}, mention: `fields wcShadowAfter.wcPublicInner.X and wcShadowAfter.X are all sent as "X"`},
		{v: wcDupTag{}, mention: `fields wcDupTag.A and wcDupTag.B are all sent as "x"`},
		{v: wcInlineShadow{}, mention: "field wcInlineShadow.wcPublicInner.X is hidden"},
		{v: wcEmbedInt{}, mention: "embedded field wcEmbedInt.wcSecretInt (actorrt.wcSecretInt) has an unexported type"},
		{v: wcEmbedPtr{}, mention: "embedded field wcEmbedPtr.wcPublicInner (*actorrt.wcPublicInner) has an unexported type"},
		{v: wcEmbedPubPtr{}, mention: "a nil WCPublic would arrive as a pointer to a zero actorrt.WCPublic"},
		{v: wcInlinePtr{}, mention: "msgpack inlines only a struct, and panics on a ptr"},
		{v: wcInternInt{}, mention: "msgpack interns only strings, and panics on a int"},
		{v: map[*int]int{}, mention: "map key type *int holds pointers"},
		{v: map[wcPtrKey]int{}, mention: "map key type actorrt.wcPtrKey holds pointers"},
		{v: wcPtrCodec{}, mention: "has EncodeMsgpack on *actorrt.wcPtrCodec only"},
		{v: wcHoldsPtrCodec{}, mention: "wcHoldsPtrCodec.P: actorrt.wcPtrCodec has EncodeMsgpack on *actorrt.wcPtrCodec only"},
		{v: map[string]wcPtrCodec{}, mention: "has EncodeMsgpack on *actorrt.wcPtrCodec only"},
		{v: wcHalf{}, mention: "has EncodeMsgpack but no DecodeMsgpack", codec: true},
		{v: wcMixed{}, mention: "encodes with MarshalText but decodes with UnmarshalBinary", codec: true},
		{v: wcLendsCodec{}, mention: "gets EncodeMsgpack from its embedded field wcCodec, so msgpack would send that field alone", codec: true},
		{v: &wcLendsCodec{}, mention: "gets EncodeMsgpack from its embedded field wcCodec", codec: true},
		{v: wcUnexportedCodec{}, mention: "gets EncodeMsgpack from its embedded field wcCodec2", codec: true},
		{v: wcStamped{}, mention: "gets MarshalBinary from its embedded field Time", codec: true},
		{v: ValueMesh[struct{ a int }]{}, mention: "field a (int) is unexported", codec: true},
		{v: Port[map[*int]int]{}, mention: "map key type *int holds pointers", codec: true},
		{v: make(chan int), mention: "a chan cannot be sent"},
		{v: struct{ F func() }{}, mention: "F: a func cannot be sent"},
		{v: []any{}, mention: "interface type interface {} cannot be decoded"},
		{v: map[string]any{}, mention: "interface type interface {} cannot be decoded"}, // a block in it would not come back typed
		{v: struct{ W any }{}, mention: "W: interface type interface {} cannot be decoded"},
		{v: complex(1, 2), mention: "a complex128 cannot be sent"},
	}
	for _, tt := range tests {
		typ := reflect.TypeOf(tt.v)
		t.Run(typ.String(), func(t *testing.T) {
			problems := wireProblems(typ)
			all := strings.Join(problems, "\n")
			switch {
			case tt.mention == "" && len(problems) > 0:
				t.Errorf("refused:\n%s", all)
			case tt.mention != "" && !strings.Contains(all, tt.mention):
				t.Errorf("problems:\n%s\nwant one that mentions %q", all, tt.mention)
			}
			if tt.codec {
				return
			}
			trips, why := roundTrips(typ)
			if trips != (len(problems) == 0) {
				t.Errorf("the check says %v, but a trip through msgpack %s", problems, why)
			}
		})
	}
}

// TestWireCheckListsEveryProblem: two unexported fields, two problems.
func TestWireCheckListsEveryProblem(t *testing.T) {
	ps := wireProblems(reflect.TypeFor[struct{ a, b int }]())
	if len(ps) != 2 || !strings.Contains(ps[0], "field a ") || !strings.Contains(ps[1], "field b ") {
		t.Fatalf("problems %q", ps)
	}
}

// TestSDKWireTypesPass: every type the SDK hands out for messages passes
// the check; the meshes travel by pointer.
func TestSDKWireTypesPass(t *testing.T) {
	for _, typ := range []reflect.Type{
		reflect.TypeFor[Point](), reflect.TypeFor[Extent](), reflect.TypeFor[Dims](), reflect.TypeFor[Dim](),
		reflect.TypeFor[ValueMesh[int]](), reflect.TypeFor[ValueMesh[Point]](), reflect.TypeFor[ValueMesh[ValueMesh[string]]](),
		reflect.TypeFor[*ActorMesh[wcActor]](), reflect.TypeFor[[]*ActorMesh[wcActor]](), reflect.TypeFor[*ProcMesh](),
		reflect.TypeFor[map[string]*ProcMesh](), reflect.TypeFor[*HostMesh](), reflect.TypeFor[Port[int]](),
		reflect.TypeFor[Port[ValueMesh[Point]]](), reflect.TypeFor[*ActorError](), reflect.TypeFor[ActorError](),
		reflect.TypeFor[*MeshFailure](), reflect.TypeFor[Void](), reflect.TypeFor[msgpack.RawMessage](),
	} {
		if ps := wireProblems(typ); len(ps) > 0 {
			t.Errorf("%s: %q", typ, ps)
		}
	}
	// By value too: their codecs are registered by type (wirevalue.go),
	// and work on a copy of a value that is not addressable.
	for _, typ := range []reflect.Type{reflect.TypeFor[ActorMesh[wcActor]](), reflect.TypeFor[ProcMesh](), reflect.TypeFor[HostMesh]()} {
		if ps := wireProblems(typ); len(ps) > 0 {
			t.Errorf("%s: %q", typ, ps)
		}
	}
}

// roundTrips sends values of t through msgpack as the runtime does (by
// value, not addressable) and tells whether they come back equal: one
// with every field (exported or not) set, and one with pointers, slices
// and maps left nil.
func roundTrips(t reflect.Type) (bool, string) {
	for _, full := range []bool{true, false} {
		v := reflect.New(t).Elem()
		fill(v, full, 0)
		if ok, why := tripOnce(v); !ok {
			return false, why
		}
	}
	return true, "keeps the value"
}

func tripOnce(v reflect.Value) (ok bool, why string) {
	defer func() {
		if r := recover(); r != nil {
			ok, why = false, fmt.Sprintf("panics: %v", r)
		}
	}()
	prepareWire(v.Type())
	b, err := msgpack.Marshal(v.Interface())
	if err != nil {
		return false, "fails to encode: " + err.Error()
	}
	back := reflect.New(v.Type())
	if err := msgpack.Unmarshal(b, back.Interface()); err != nil {
		return false, "fails to decode: " + err.Error()
	}
	if !reflect.DeepEqual(back.Elem().Interface(), v.Interface()) {
		return false, fmt.Sprintf("turns %+v into %+v", v.Interface(), back.Elem().Interface())
	}
	return true, ""
}

var fillSeq int

// fill sets every field of v, unexported ones too, to values that differ
// from each other and from zero; full=false leaves pointers, slices and
// maps nil. A field tagged msgpack:"-" is left alone: not sending it is
// the point of the tag. Types with codecs are left zero.
func fill(v reflect.Value, full bool, depth int) {
	if depth > 8 || wirecheck.HasCodec(v.Type()) {
		return
	}
	fillSeq++
	switch v.Kind() {
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(int64(fillSeq%100 + 1))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		v.SetUint(uint64(fillSeq%100 + 1))
	case reflect.Float32, reflect.Float64:
		v.SetFloat(float64(fillSeq) + 0.5)
	case reflect.Complex64, reflect.Complex128:
		v.SetComplex(complex(1, 2))
	case reflect.String:
		v.SetString(fmt.Sprint("s", fillSeq))
	case reflect.Chan:
		v.Set(reflect.MakeChan(v.Type(), 0))
	case reflect.Func:
		v.Set(reflect.MakeFunc(v.Type(), func([]reflect.Value) []reflect.Value { panic("not called") }))
	case reflect.Interface:
		if v.NumMethod() == 0 {
			v.Set(reflect.ValueOf(fillSeq))
		}
	case reflect.Pointer:
		if full {
			v.Set(reflect.New(v.Type().Elem()))
			fill(v.Elem(), full, depth+1)
		}
	case reflect.Slice:
		if full {
			v.Set(reflect.MakeSlice(v.Type(), 2, 2))
			for i := 0; i < 2; i++ {
				fill(v.Index(i), full, depth+1)
			}
		}
	case reflect.Array:
		for i := 0; i < v.Len(); i++ {
			fill(v.Index(i), full, depth+1)
		}
	case reflect.Map:
		if full {
			v.Set(reflect.MakeMap(v.Type()))
			for i := 0; i < 2; i++ {
				k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
				fill(k, full, depth+1)
				fill(e, full, depth+1)
				v.SetMapIndex(k, e)
			}
		}
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			f := v.Type().Field(i)
			if f.Name == "_" || f.Tag.Get("msgpack") == "-" {
				continue
			}
			fv := v.Field(i)
			if !f.IsExported() {
				fv = reflect.NewAt(f.Type, unsafe.Pointer(fv.UnsafeAddr())).Elem()
			}
			fill(fv, full, depth+1)
		}
	}
}

// TestValueCodecs: Extent, Point and ValueMesh keep their meaning through
// msgpack, alone and nested in structs, slices, maps and each other.
func TestValueCodecs(t *testing.T) {
	ext, _ := NewExtent(Dims{{"hosts", 2}, {"gpus", 3}})
	one, _ := NewExtent(Dims{{"gpus", 1}})
	pt, _ := NewPoint(ext, 1, 2)
	points := ValueMesh[Point]{ext: ext, vals: ext.Points()}
	ints := ValueMesh[int]{ext: one, vals: []int{7}}
	type nest struct {
		E     Extent
		P     Point
		PP    *Point
		V     ValueMesh[Point]
		ByPos map[string]Point
		Vs    []ValueMesh[int]
		VV    ValueMesh[ValueMesh[int]]
		Bytes ValueMesh[byte]
		Zero  ValueMesh[string]
		Z     Point
		ZE    Extent
	}
	in := nest{
		E: ext, P: pt, PP: &pt, V: points,
		ByPos: map[string]Point{"a": pt, "zero": {}, "first": ext.Points()[0]},
		Vs:    []ValueMesh[int]{ints, {}},
		VV:    ValueMesh[ValueMesh[int]]{ext: one, vals: []ValueMesh[int]{ints}},
		Bytes: ValueMesh[byte]{ext: ext, vals: []byte{1, 2, 3, 4, 5, 6}},
	}
	prepareWire(reflect.TypeOf(in))
	b, err := msgpack.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	var out nest
	if err := msgpack.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	if got, want := fmt.Sprintf("%+v", out), fmt.Sprintf("%+v", in); got != want {
		t.Errorf("came back as\n%s\nwant\n%s", got, want)
	}
	switch {
	case !out.E.Equal(ext) || !out.P.Extent().Equal(ext) || out.P.Rank() != pt.Rank():
		t.Errorf("extent %v, point %v", out.E, out.P)
	case !out.V.Extent().Equal(ext) || out.V.Len() != 6 || out.V.Values()[4].Rank() != 4:
		t.Errorf("value mesh of points %v", out.V)
	case out.VV.Values()[0].Values()[0] != 7 || !out.Bytes.Extent().Equal(ext) || out.Bytes.Values()[5] != 6:
		t.Errorf("nested value meshes %v %v", out.VV, out.Bytes)
	}
	if p, err := out.V.At(pt); err != nil || p.Rank() != pt.Rank() {
		t.Errorf("At(%v) on the received mesh: %v, %v", pt, p, err)
	}
	if !reflect.DeepEqual(out.Zero, ValueMesh[string]{}) || !reflect.DeepEqual(out.Z, Point{}) || !reflect.DeepEqual(out.ZE, Extent{}) {
		t.Errorf("zero values came back as %#v %#v %#v", out.Zero, out.Z, out.ZE)
	}
}

// TestValueCodecsRefuseBadBytes: what a buggy peer sends gets ErrDecode,
// never a panic or an allocation the size it claims.
func TestValueCodecsRefuseBadBytes(t *testing.T) {
	enc := func(parts ...any) []byte {
		var buf bytes.Buffer
		e := msgpack.NewEncoder(&buf)
		for _, p := range parts {
			switch p := p.(type) {
			case arr:
				e.EncodeArrayLen(int(p))
			default:
				e.Encode(p)
			}
		}
		return buf.Bytes()
	}
	tests := []struct {
		name string
		data []byte
		into any
	}{
		{"extent of an odd count", enc(arr(3), "a", 1, "b"), new(Extent)},
		{"extent of size 0", enc(arr(2), "a", 0), new(Extent)},
		{"extent with a repeated name", enc(arr(4), "a", 1, "a", 2), new(Extent)},
		{"point of too few coordinates", enc(arr(2), arr(2), "a", 2, arr(0)), new(Point)},
		{"point out of range", enc(arr(2), arr(2), "a", 2, arr(1), 2), new(Point)},
		{"point of three parts", enc(arr(3), arr(0), arr(0), 1), new(Point)},
		{"value mesh of too few values", enc(arr(2), arr(2), "a", 2, arr(1), 5), new(ValueMesh[int])},
		{"value mesh claiming a billion values", enc(arr(2), arr(2), "a", 1_000_000_000, arr(1_000_000_000), 1), new(ValueMesh[int])},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			prepareWire(reflect.TypeOf(tt.into))
			err := msgpack.Unmarshal(tt.data, tt.into)
			if err == nil {
				t.Fatalf("decoded %v", reflect.ValueOf(tt.into).Elem())
			}
			if !errors.Is(err, ErrDecode) && !strings.Contains(err.Error(), "EOF") {
				t.Fatalf("err = %v", err)
			}
		})
	}
}

type arr int

// wcLossless has endpoints whose values all travel.
type wcLossless struct{}

func (*wcLossless) Skip(ctx *Context, s wcSkip, p *[2]wcPlain) (time.Time, error) {
	return time.Time{}, nil
}
func (*wcLossless) Own(ctx *Context, o []wcOwnCodec) (map[wcKey]ValueMesh[Point], error) {
	return nil, nil
}
func (*wcLossless) Answer(ctx *Context, p Port[ValueMesh[Extent]], n int) error { return nil }

// PortPtr takes a *Port first: a plain argument, not a port to answer on
// (the Port adverbs take a Port).
func (*wcLossless) PortPtr(ctx *Context, p *Port[string]) error { return nil }

func TestInspectAcceptsWhatTravels(t *testing.T) {
	at, err := inspect(reflect.TypeFor[wcLossless]())
	if err != nil {
		t.Fatal(err)
	}
	if m := at.endpoints["Answer"]; m == nil || m.port == nil || len(m.args) != 1 {
		t.Errorf("Answer: %+v", m)
	}
	if m := at.endpoints["PortPtr"]; m == nil || m.port != nil || len(m.args) != 1 {
		t.Errorf("PortPtr: %+v", m)
	}
}
