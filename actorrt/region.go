package actorrt

import "fmt"

// region is the part of a mesh a (sliced) reference selects: a box of the
// mesh's base extent. Slicing keeps a dimension with a smaller range;
// indexing (At) fixes it to one index and drops it from the view. Every
// slice of a slice is again a box, so a region is a start, a size and a
// kept flag per base dimension. It is immutable.
type region struct {
	base  Extent
	start []int
	size  []int
	kept  []bool
}

// wholeRegion selects all of base.
func wholeRegion(base Extent) region {
	n := len(base.dims)
	r := region{base: base, start: make([]int, n), size: make([]int, n), kept: make([]bool, n)}
	for i, d := range base.dims {
		r.size[i] = d.Size
		r.kept[i] = true
	}
	return r
}

func (r region) clone() region {
	return region{
		base:  r.base,
		start: append([]int(nil), r.start...),
		size:  append([]int(nil), r.size...),
		kept:  append([]bool(nil), r.kept...),
	}
}

// isWhole reports whether r selects all of its base, unchanged.
// It is asked on every send, and by the state feed's count of it: by
// pointer and by index, it copies neither the region nor a dimension's
// name.
func (r *region) isWhole() bool {
	dims := r.base.dims
	if len(r.start) != len(dims) || len(r.size) != len(dims) || len(r.kept) != len(dims) {
		return false
	}
	for i := range dims {
		if r.start[i] != 0 || r.size[i] != dims[i].Size || !r.kept[i] {
			return false
		}
	}
	return true
}

// extent is the view's own shape: the kept dimensions and their sizes.
func (r region) extent() Extent {
	var dims Dims
	for i, d := range r.base.dims {
		if r.kept[i] {
			dims = append(dims, Dim{d.Name, r.size[i]})
		}
	}
	return Extent{dims: dims}
}

func (r region) numRanks() int {
	n := 1
	for _, s := range r.size {
		n *= s
	}
	return n
}

// keptIndex finds a dimension of the view by name.
func (r region) keptIndex(dim string) (int, error) {
	i := r.base.index(dim)
	if i < 0 || !r.kept[i] {
		return 0, fmt.Errorf("%w: no dimension %q in %v", ErrOutOfRange, dim, r.extent())
	}
	return i, nil
}

// slice keeps dim with the view-relative range [start, end).
func (r region) slice(dim string, start, end int) (region, error) {
	i, err := r.keptIndex(dim)
	if err != nil {
		return region{}, err
	}
	if start < 0 || end > r.size[i] || start >= end {
		return region{}, fmt.Errorf("%w: slice %s[%d:%d] of %v", ErrOutOfRange, dim, start, end, r.extent())
	}
	out := r.clone()
	out.start[i] += start
	out.size[i] = end - start
	return out, nil
}

// at fixes dim to the view-relative index and drops it from the view.
func (r region) at(dim string, index int) (region, error) {
	i, err := r.keptIndex(dim)
	if err != nil {
		return region{}, err
	}
	if index < 0 || index >= r.size[i] {
		return region{}, fmt.Errorf("%w: %s=%d not in %v", ErrOutOfRange, dim, index, r.extent())
	}
	out := r.clone()
	out.start[i] += index
	out.size[i] = 1
	out.kept[i] = false
	return out, nil
}

// messageRank tells whether the base rank lies in r and, if so, its rank in
// the view (row-major over the kept dimensions).
func (r region) messageRank(baseRank int) (int, bool) {
	rank := 0
	// Walk the base coordinates from the innermost dimension outwards.
	mul := 1
	for i := len(r.base.dims) - 1; i >= 0; i-- {
		c := baseRank % r.base.dims[i].Size
		baseRank /= r.base.dims[i].Size
		c -= r.start[i]
		if c < 0 || c >= r.size[i] {
			return 0, false
		}
		if r.kept[i] {
			rank += c * mul
			mul *= r.size[i]
		}
	}
	return rank, true
}

// baseRank maps a rank of the view to the rank in the base extent.
func (r region) baseRank(viewRank int) int {
	coords := make([]int, len(r.base.dims))
	for i := len(r.base.dims) - 1; i >= 0; i-- {
		coords[i] = r.start[i] + viewRank%r.size[i]
		viewRank /= r.size[i]
	}
	rank := 0
	for i, d := range r.base.dims {
		rank = rank*d.Size + coords[i]
	}
	return rank
}

// baseRanks lists the base ranks of the view, in view rank order.
func (r region) baseRanks() []int {
	out := make([]int, r.numRanks())
	for v := range out {
		out[v] = r.baseRank(v)
	}
	return out
}

// single is the region of one member: the view rank's base point with
// every dimension fixed.
func (r region) single(viewRank int) region {
	out := r.clone()
	for i := len(r.base.dims) - 1; i >= 0; i-- {
		out.start[i] = r.start[i] + viewRank%r.size[i]
		viewRank /= r.size[i]
		out.size[i] = 1
		out.kept[i] = false
	}
	return out
}

// appendWire appends r's wire form (wire.Header.Region) to dst: start,
// size and kept (1 or 0) per base dimension.
func (r region) appendWire(dst []int) []int {
	for i := range r.start {
		k := 0
		if r.kept[i] {
			k = 1
		}
		dst = append(dst, r.start[i], r.size[i], k)
	}
	return dst
}

// wireRegion is a region as sent: start, size and kept per base dimension.
// The receiver joins it to the base extent it knows for the mesh.
type wireRegion []int

// toRegion joins a wire region to the mesh's base extent.
func (wr wireRegion) toRegion(base Extent) (region, error) {
	if len(wr) != 3*len(base.dims) {
		return region{}, fmt.Errorf("%w: region of %d dimensions for %v", ErrDecode, len(wr)/3, base)
	}
	r := region{base: base, start: make([]int, len(base.dims)), size: make([]int, len(base.dims)), kept: make([]bool, len(base.dims))}
	for i, d := range base.dims {
		r.start[i], r.size[i], r.kept[i] = wr[3*i], wr[3*i+1], wr[3*i+2] == 1
		if r.start[i] < 0 || r.size[i] < 1 || r.start[i]+r.size[i] > d.Size || wr[3*i+2]&^1 != 0 {
			return region{}, fmt.Errorf("%w: region %v of %v", ErrDecode, []int(wr), base)
		}
	}
	return r, nil
}
