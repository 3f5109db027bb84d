//go:build !amd64

package collective

// addFloat32s adds src into dst, element by element, as far as both go
// (sum_amd64.s does it with SSE).
func addFloat32s(dst, src []float32) { addLoop(dst, src) }

// addFloat64s is addFloat32s for float64.
func addFloat64s(dst, src []float64) { addLoop(dst, src) }
