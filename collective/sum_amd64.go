package collective

// addFloat32s adds src into dst, element by element, as far as both go,
// with SSE: the same bits as the loop in reduce, several elements an
// instruction (sum_amd64.s).
//
//go:noescape
func addFloat32s(dst, src []float32)

// addFloat64s is addFloat32s for float64.
//
//go:noescape
func addFloat64s(dst, src []float64)
