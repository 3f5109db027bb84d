package main

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestGradients: gorgonia's symbolic gradients of the single-process
// model's loss agree with central finite differences, at random
// parameters.
func TestGradients(t *testing.T) {
	x, y := dataset(3)
	m, err := newModel(x[:100*features], y[:100])
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(5, 5))
	ps := initial(9)
	for i := range ps {
		for j := range ps[i] {
			ps[i][j] += 0.1 * r.NormFloat64()
		}
	}
	_, grads, err := m.eval(ps)
	if err != nil {
		t.Fatal(err)
	}
	const h = 1e-6
	lossAt := func() float64 {
		l, _, err := m.eval(ps)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	for i := range ps {
		for j := range ps[i] {
			v := ps[i][j]
			ps[i][j] = v + h
			hi := lossAt()
			ps[i][j] = v - h
			lo := lossAt()
			ps[i][j] = v
			fd := (hi - lo) / (2 * h)
			if math.Abs(fd-grads[i][j]) > 1e-6*math.Max(1, math.Abs(fd)) {
				t.Errorf("d loss / d param %d[%d]: gorgonia %.9f, finite differences %.9f", i, j, grads[i][j], fd)
			}
		}
	}
}
