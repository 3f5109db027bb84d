package collective

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestAddVector: the vector sums give the loop's bits, for every length
// around the vector width, from unaligned starts, with src shorter or
// longer than dst, and with infinities and NaNs among the values.
func TestAddVector(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	specials := []float64{math.Inf(1), math.Inf(-1), math.NaN(), 0, math.Copysign(0, -1), math.MaxFloat32, 1e-45}
	value := func() float64 {
		if r.IntN(10) == 0 {
			return specials[r.IntN(len(specials))]
		}
		return r.NormFloat64() * 1e3
	}
	for n := 0; n <= 70; n++ {
		for _, skew := range []int{0, 1, 3} {
			for _, srcLen := range []int{n, n / 2, n + 5} {
				d32, s32 := make([]float32, n+skew), make([]float32, srcLen+skew)
				d64, s64 := make([]float64, n+skew), make([]float64, srcLen+skew)
				for i := range d32 {
					d32[i], d64[i] = float32(value()), value()
				}
				for i := range s32 {
					s32[i], s64[i] = float32(value()), value()
				}
				w32, w64 := append([]float32(nil), d32...), append([]float64(nil), d64...)
				addLoop(w32[skew:], s32[skew:])
				addLoop(w64[skew:], s64[skew:])
				addFloat32s(d32[skew:], s32[skew:])
				addFloat64s(d64[skew:], s64[skew:])
				for i := range d32 {
					if math.Float32bits(d32[i]) != math.Float32bits(w32[i]) {
						t.Fatalf("float32 n=%d skew=%d src=%d: element %d = %v, want %v", n, skew, srcLen, i, d32[i], w32[i])
					}
					if math.Float64bits(d64[i]) != math.Float64bits(w64[i]) {
						t.Fatalf("float64 n=%d skew=%d src=%d: element %d = %v, want %v", n, skew, srcLen, i, d64[i], w64[i])
					}
				}
			}
		}
	}
}

// BenchmarkReduceSum: the vector sum against the loop, on a 1 MiB piece
// (a streaming link's).
func BenchmarkReduceSum(b *testing.B) {
	dst, src := make([]float32, 1<<18), make([]float32, 1<<18)
	for i := range src {
		src[i] = float32(i)
	}
	b.Run("vector", func(b *testing.B) {
		b.SetBytes(4 << 18)
		for b.Loop() {
			addFloat32s(dst, src)
		}
	})
	b.Run("loop", func(b *testing.B) {
		b.SetBytes(4 << 18)
		for b.Loop() {
			addLoop(dst, src)
		}
	})
}
