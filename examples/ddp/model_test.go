package main

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestGradients: gorgonia's symbolic gradients of the loss agree with
// central finite differences, at random parameters.
func TestGradients(t *testing.T) {
	x, y := dataset(3)
	m, err := newModel(x[:100], y[:100])
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(5, 5))
	w, b := make([]float64, features), r.NormFloat64()
	for j := range w {
		w[j] = r.NormFloat64()
	}
	_, grad, err := m.eval(w, b)
	if err != nil {
		t.Fatal(err)
	}
	const h = 1e-6
	lossAt := func(w []float64, b float64) float64 {
		l, _, err := m.eval(w, b)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	for j := 0; j <= features; j++ {
		wp, wm := append([]float64(nil), w...), append([]float64(nil), w...)
		bp, bm := b, b
		if j < features {
			wp[j] += h
			wm[j] -= h
		} else {
			bp += h
			bm -= h
		}
		fd := (lossAt(wp, bp) - lossAt(wm, bm)) / (2 * h)
		if math.Abs(fd-grad[j]) > 1e-6*math.Max(1, math.Abs(fd)) {
			t.Errorf("d loss / d param %d: gorgonia %.9f, finite differences %.9f", j, grad[j], fd)
		}
	}
}
