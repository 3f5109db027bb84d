package actorrt

import (
	"errors"
	"reflect"
	"testing"
)

func mustExtent(t *testing.T, dims Dims) Extent {
	t.Helper()
	e, err := NewExtent(dims)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func TestNewExtentErrors(t *testing.T) {
	tests := []struct {
		name string
		dims Dims
	}{
		{"empty name", Dims{{"", 2}}},
		{"repeated name", Dims{{"gpus", 2}, {"gpus", 3}}},
		{"zero size", Dims{{"gpus", 0}}},
		{"negative size", Dims{{"gpus", -1}}},
		{"dot in name", Dims{{"a.b", 1}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := NewExtent(tt.dims); !errors.Is(err, ErrBadExtent) {
				t.Fatalf("NewExtent(%v) = %v, want ErrBadExtent", tt.dims, err)
			}
		})
	}
}

func TestExtentRanksRowMajor(t *testing.T) {
	e := mustExtent(t, Dims{{"hosts", 2}, {"gpus", 3}})
	if e.NumRanks() != 6 || e.String() != "{hosts: 2, gpus: 3}" {
		t.Fatalf("extent %v with %d ranks", e, e.NumRanks())
	}
	want := [][]int{{0, 0}, {0, 1}, {0, 2}, {1, 0}, {1, 1}, {1, 2}}
	for r, p := range e.Points() {
		if !reflect.DeepEqual(p.Coords(), want[r]) || p.Rank() != r {
			t.Errorf("rank %d: point %v (rank %d), want %v", r, p, p.Rank(), want[r])
		}
	}
	if p, _ := e.Point(4); p.String() != "{hosts: 1, gpus: 1}" {
		t.Errorf("Point(4) = %v", p)
	}
	if _, err := e.Point(6); !errors.Is(err, ErrOutOfRange) {
		t.Errorf("Point(6) err = %v", err)
	}
	if g, ok := mustPoint(t, e, 1, 2).Get("gpus"); !ok || g != 2 {
		t.Errorf("Get(gpus) = %d, %v", g, ok)
	}
	if (Extent{}).NumRanks() != 1 || (Extent{}).String() != "{}" {
		t.Errorf("zero extent: %v with %d ranks", Extent{}, Extent{}.NumRanks())
	}
}

func mustPoint(t *testing.T, e Extent, coords ...int) Point {
	t.Helper()
	p, err := NewPoint(e, coords...)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// op is one slicing step: slice(dim, a, b) or at(dim, a) when b < 0.
type op struct {
	dim  string
	a, b int
}

func apply(r region, ops []op) (region, error) {
	var err error
	for _, o := range ops {
		if o.b < 0 {
			r, err = r.at(o.dim, o.a)
		} else {
			r, err = r.slice(o.dim, o.a, o.b)
		}
		if err != nil {
			return r, err
		}
	}
	return r, nil
}

func TestRegionSlicing(t *testing.T) {
	base := mustExtent(t, Dims{{"hosts", 2}, {"gpus", 8}})
	tests := []struct {
		name      string
		ops       []op
		extent    string
		baseRanks []int
	}{
		{"whole", nil, "{hosts: 2, gpus: 8}", seq(0, 16)},
		{"slice gpus", []op{{"gpus", 0, 4}}, "{hosts: 2, gpus: 4}", []int{0, 1, 2, 3, 8, 9, 10, 11}},
		{"slice hosts", []op{{"hosts", 1, 2}}, "{hosts: 1, gpus: 8}", seq(8, 16)},
		{"at host", []op{{"hosts", 1, -1}}, "{gpus: 8}", seq(8, 16)},
		{"nested slices", []op{{"gpus", 2, 8}, {"gpus", 1, 3}}, "{hosts: 2, gpus: 2}", []int{3, 4, 11, 12}},
		{"slice then at", []op{{"gpus", 4, 8}, {"hosts", 0, -1}, {"gpus", 2, -1}}, "{}", []int{6}},
		{"at then slice", []op{{"hosts", 1, -1}, {"gpus", 6, 8}}, "{gpus: 2}", []int{14, 15}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := apply(wholeRegion(base), tt.ops)
			if err != nil {
				t.Fatal(err)
			}
			if got := r.extent().String(); got != tt.extent {
				t.Errorf("extent %s, want %s", got, tt.extent)
			}
			if got := r.baseRanks(); !reflect.DeepEqual(got, tt.baseRanks) {
				t.Errorf("base ranks %v, want %v", got, tt.baseRanks)
			}
			// Every base rank in the region has the message rank of its
			// position; every other base rank is outside.
			in := map[int]int{}
			for v, b := range tt.baseRanks {
				in[b] = v
			}
			for b := 0; b < base.NumRanks(); b++ {
				v, ok := r.messageRank(b)
				want, wantOK := in[b]
				if ok != wantOK || ok && v != want {
					t.Errorf("messageRank(%d) = %d, %v; want %d, %v", b, v, ok, want, wantOK)
				}
			}
			if r.isWhole() != (len(tt.ops) == 0) {
				t.Errorf("isWhole = %v", r.isWhole())
			}
		})
	}
}

func TestRegionSlicingErrors(t *testing.T) {
	base := mustExtent(t, Dims{{"hosts", 2}, {"gpus", 8}})
	tests := []struct {
		name string
		ops  []op
	}{
		{"end past size", []op{{"gpus", 0, 9}}},
		{"negative start", []op{{"gpus", -1, 2}}},
		{"empty", []op{{"gpus", 3, 3}}},
		{"unknown dim", []op{{"nodes", 0, 1}}},
		{"at out of range", []op{{"hosts", 2, -1}}},
		{"dim already fixed", []op{{"hosts", 0, -1}, {"hosts", 0, 1}}},
		{"nested past the slice", []op{{"gpus", 0, 4}, {"gpus", 2, 5}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := apply(wholeRegion(base), tt.ops); !errors.Is(err, ErrOutOfRange) {
				t.Fatalf("err = %v, want ErrOutOfRange", err)
			}
		})
	}
}

func TestRegionSingle(t *testing.T) {
	base := mustExtent(t, Dims{{"hosts", 2}, {"gpus", 4}})
	r, _ := wholeRegion(base).slice("gpus", 1, 3)
	for v, b := range r.baseRanks() {
		s := r.single(v)
		if s.numRanks() != 1 || len(s.extent().dims) != 0 || s.baseRank(0) != b {
			t.Errorf("single(%d): %d ranks, extent %v, base rank %d; want base rank %d", v, s.numRanks(), s.extent(), s.baseRank(0), b)
		}
	}
}

func seq(lo, hi int) []int {
	var out []int
	for i := lo; i < hi; i++ {
		out = append(out, i)
	}
	return out
}
