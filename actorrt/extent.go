package actorrt

import (
	"fmt"
	"strings"

	"github.com/vmihailenco/msgpack/v5"
)

// Dim is one named dimension of a mesh and its size. It is an alias of an
// unnamed struct so that Dims{{"gpus", 8}} reads as it does here and stays
// clean under go vet's unkeyed-literal check.
type Dim = struct {
	Name string
	Size int
}

// Dims lists dimensions in order, outermost first: Dims{{"hosts", 2},
// {"gpus", 4}}. Order matters (ranks are row-major), which is why it is a
// slice and not a map.
type Dims []Dim

// Extent is the shape of a mesh: ordered, named dimensions. The zero
// Extent has no dimensions and one rank (a single proc or actor). Extents
// are immutable values.
type Extent struct {
	dims Dims
}

// NewExtent checks dims (names non-empty and unique, sizes >= 1) and
// returns their Extent.
func NewExtent(dims Dims) (Extent, error) {
	seen := make(map[string]bool, len(dims))
	for _, d := range dims {
		switch {
		case d.Name == "":
			return Extent{}, fmt.Errorf("%w: empty dimension name in %v", ErrBadExtent, dims)
		case !validName(d.Name):
			return Extent{}, fmt.Errorf("%w: dimension name %q: use letters, digits, '_' or '-'", ErrBadExtent, d.Name)
		case seen[d.Name]:
			return Extent{}, fmt.Errorf("%w: dimension %q given twice", ErrBadExtent, d.Name)
		case d.Size < 1:
			return Extent{}, fmt.Errorf("%w: dimension %q has size %d, want >= 1", ErrBadExtent, d.Name, d.Size)
		}
		seen[d.Name] = true
	}
	return Extent{dims: append(Dims(nil), dims...)}, nil
}

func validName(s string) bool {
	for _, r := range s {
		if !(r == '_' || r == '-' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			return false
		}
	}
	return s != ""
}

// Dims returns a copy of the dimensions.
func (e Extent) Dims() Dims { return append(Dims(nil), e.dims...) }

// Names returns the dimension names in order.
func (e Extent) Names() []string {
	out := make([]string, len(e.dims))
	for i, d := range e.dims {
		out[i] = d.Name
	}
	return out
}

// Size returns the size of dimension name.
func (e Extent) Size(name string) (int, bool) {
	if i := e.index(name); i >= 0 {
		return e.dims[i].Size, true
	}
	return 0, false
}

// NumRanks is the number of points in the extent (1 for the zero Extent).
func (e Extent) NumRanks() int {
	n := 1
	for _, d := range e.dims {
		n *= d.Size
	}
	return n
}

// Point returns the point of a row-major rank, or an error if rank is out
// of range.
func (e Extent) Point(rank int) (Point, error) {
	if rank < 0 || rank >= e.NumRanks() {
		return Point{}, fmt.Errorf("%w: rank %d not in %v (%d ranks)", ErrOutOfRange, rank, e, e.NumRanks())
	}
	return e.point(rank), nil
}

func (e Extent) point(rank int) Point {
	coords := make([]int, len(e.dims))
	for i := len(e.dims) - 1; i >= 0; i-- {
		coords[i] = rank % e.dims[i].Size
		rank /= e.dims[i].Size
	}
	return Point{ext: e, coords: coords}
}

// Points returns every point in rank order.
func (e Extent) Points() []Point {
	out := make([]Point, e.NumRanks())
	for r := range out {
		out[r] = e.point(r)
	}
	return out
}

// Equal reports whether two extents have the same dimensions in the same
// order.
func (e Extent) Equal(o Extent) bool {
	if len(e.dims) != len(o.dims) {
		return false
	}
	for i := range e.dims {
		if e.dims[i] != o.dims[i] {
			return false
		}
	}
	return true
}

func (e Extent) index(name string) int {
	for i, d := range e.dims {
		if d.Name == name {
			return i
		}
	}
	return -1
}

// String prints {hosts: 2, gpus: 4}.
func (e Extent) String() string {
	var b strings.Builder
	b.WriteByte('{')
	for i, d := range e.dims {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s: %d", d.Name, d.Size)
	}
	b.WriteByte('}')
	return b.String()
}

// Point is a position in an Extent: one index per dimension. Ranks are
// multidimensional; Rank gives the row-major number when one is needed.
type Point struct {
	ext    Extent
	coords []int
}

// NewPoint returns the point of ext with the given index per dimension, in
// order.
func NewPoint(ext Extent, coords ...int) (Point, error) {
	if len(coords) != len(ext.dims) {
		return Point{}, fmt.Errorf("%w: %d coordinates for %v", ErrOutOfRange, len(coords), ext)
	}
	for i, c := range coords {
		if c < 0 || c >= ext.dims[i].Size {
			return Point{}, fmt.Errorf("%w: %s=%d not in %v", ErrOutOfRange, ext.dims[i].Name, c, ext)
		}
	}
	return Point{ext: ext, coords: append([]int(nil), coords...)}, nil
}

// Extent is the extent the point lies in.
func (p Point) Extent() Extent { return p.ext }

// Get returns the index along dimension name.
func (p Point) Get(name string) (int, bool) {
	if i := p.ext.index(name); i >= 0 {
		return p.coords[i], true
	}
	return 0, false
}

// Coords returns the indices in dimension order.
func (p Point) Coords() []int { return append([]int(nil), p.coords...) }

// Rank is the row-major position of the point in its extent.
func (p Point) Rank() int {
	r := 0
	for i, d := range p.ext.dims {
		r = r*d.Size + p.coords[i]
	}
	return r
}

// String prints {hosts: 0, gpus: 3}.
func (p Point) String() string {
	var b strings.Builder
	b.WriteByte('{')
	for i, d := range p.ext.dims {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s: %d", d.Name, p.coords[i])
	}
	b.WriteByte('}')
	return b.String()
}

// Extents and points travel as endpoint arguments and results: an extent
// as its names and sizes, a point as its extent and coordinates. What
// arrives is checked as NewExtent and NewPoint check it.

// encodeWire sends the extent as [name, size, name, size, ...].
func (e Extent) encodeWire(enc *msgpack.Encoder) error {
	if err := enc.EncodeArrayLen(2 * len(e.dims)); err != nil {
		return err
	}
	for _, d := range e.dims {
		if err := enc.EncodeString(d.Name); err != nil {
			return err
		}
		if err := enc.EncodeInt(int64(d.Size)); err != nil {
			return err
		}
	}
	return nil
}

// decodeWire reads an extent sent by encodeWire.
func (e *Extent) decodeWire(dec *msgpack.Decoder) error {
	n, err := dec.DecodeArrayLen()
	if err != nil {
		return err
	}
	if n == -1 { // nil: the zero Extent, as msgpack decodes nil into any struct
		*e = Extent{}
		return nil
	}
	if n%2 != 0 {
		return fmt.Errorf("%w: extent of %d values, want (name, size) pairs", ErrDecode, n)
	}
	var dims Dims // grown as read: n comes from the peer
	for i := 0; i < n/2; i++ {
		name, err := dec.DecodeString()
		if err != nil {
			return err
		}
		size, err := dec.DecodeInt()
		if err != nil {
			return err
		}
		dims = append(dims, Dim{name, size})
	}
	ext, err := NewExtent(dims)
	if err != nil {
		return fmt.Errorf("%w: extent: %v", ErrDecode, err)
	}
	*e = ext
	return nil
}

// encodeWire sends the point as [extent, [coordinates]].
func (p Point) encodeWire(enc *msgpack.Encoder) error {
	if err := enc.EncodeArrayLen(2); err != nil {
		return err
	}
	if err := p.ext.encodeWire(enc); err != nil {
		return err
	}
	if err := enc.EncodeArrayLen(len(p.coords)); err != nil {
		return err
	}
	for _, c := range p.coords {
		if err := enc.EncodeInt(int64(c)); err != nil {
			return err
		}
	}
	return nil
}

// decodeWire reads a point sent by encodeWire.
func (p *Point) decodeWire(dec *msgpack.Decoder) error {
	if ok, err := decodeTuple(dec, "point", 2); !ok {
		*p = Point{}
		return err
	}
	var ext Extent
	if err := ext.decodeWire(dec); err != nil {
		return err
	}
	n, err := dec.DecodeArrayLen()
	if err != nil {
		return err
	}
	if max(n, 0) != len(ext.dims) {
		return fmt.Errorf("%w: point of %d coordinates in %v", ErrDecode, n, ext)
	}
	coords := make([]int, len(ext.dims))
	for i := range coords {
		if coords[i], err = dec.DecodeInt(); err != nil {
			return err
		}
	}
	pt, err := NewPoint(ext, coords...)
	if err != nil {
		return fmt.Errorf("%w: point: %v", ErrDecode, err)
	}
	*p = pt
	return nil
}

// decodeTuple reads the header of an array of n values; false, with no
// error, for nil (which stands for the zero value).
func decodeTuple(dec *msgpack.Decoder, what string, n int) (bool, error) {
	got, err := dec.DecodeArrayLen()
	switch {
	case err != nil:
		return false, err
	case got == -1:
		return false, nil
	case got != n:
		return false, fmt.Errorf("%w: %s of %d values, want %d", ErrDecode, what, got, n)
	}
	return true, nil
}
