package dtensor

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"gorgonia.org/tensor"
)

// Deferred ops. Grad's graph is the ops that made the loss, and each
// proc's gorgonia run of it computes them all again on the way to the
// gradients: running them as ops first as well would be the forward pass
// twice. So when Grad is recorded, the mesh takes out of its outbox the
// ops that make the graph's nodes and that no op left there reads (nor
// frees an input of, before they would run), and the first grad op
// carries them (op.Defer). A proc keeps each as
// pending, with its inputs as they were then: it runs when something
// reads its result (get), once, as it would have run at once. The loss
// is taken from the gradient's run. A training step reads nothing of
// its forward pass but the loss: the rest is never computed, and goes
// with the step's Drop.

// pending is an op kept to run when its result is read: its inputs'
// entries as they were when it was kept (and whether each was there),
// and once run, its result.
type pending struct {
	once sync.Once
	o    op
	k    opKind
	ins  []entry
	ok   []bool
	t    *tensor.Dense
	err  error
}

// result is the op's result as tensor id, running it the first time.
func (p *pending) result(id uint64) (*tensor.Dense, error) {
	p.once.Do(func() {
		p.t, p.err = compute(context.Background(), p.k, p.o, func(i int) (*tensor.Dense, error) {
			return p.ins[i].shard(p.o.In[i], p.ok[i])
		})
		p.ins, p.ok = nil, nil
	})
	if p.err != nil {
		return nil, fmt.Errorf("dtensor: tensor %d: %s", id, p.err)
	}
	return p.t, nil
}

// deferrable: an op a grad op may carry, to be kept pending.
func deferrable(o op) bool {
	_, ok := differentiable[o.Kind]
	return ok && o.Out != 0 && len(o.Defer) == 0
}

// deferOps keeps the ops o carries (op.Defer) pending, in order (one it
// should not carry runs at once), and if o's loss is one of them, gives
// it the value of the gradient's run.
func deferOps(o op) {
	for _, d := range o.Defer {
		k, err := lookup(d)
		if err != nil || !deferrable(d) {
			runAndKeep(context.Background(), d) // as if sent alone
			continue
		}
		p := &pending{o: d, k: k, ins: make([]entry, len(d.In)), ok: make([]bool, len(d.In))}
		store.Lock()
		for i, id := range d.In {
			p.ins[i], p.ok[i] = store.m[id]
		}
		keepLocked(d.Out, entry{p: p})
		store.Unlock()
	}
	if len(o.In) == 0 {
		return
	}
	store.Lock()
	e := store.m[o.In[0]]
	store.Unlock()
	if e.p == nil {
		return // the loss was made before
	}
	_, loss, err := gradient(o)
	if err != nil || len(o.Shape) == 0 || slices.ContainsFunc(o.Shape, func(d int) bool { return d != 1 }) {
		return // the loss's op runs when it is read (a shape off the wire: (-1, -1) is no shape of one element)
	}
	var t *tensor.Dense
	switch v := loss.(type) {
	case float64:
		t = tensor.New(tensor.WithShape(o.Shape...), tensor.WithBacking([]float64{v}))
	case float32:
		t = tensor.New(tensor.WithShape(o.Shape...), tensor.WithBacking([]float32{v}))
	default:
		return
	}
	e.p.once.Do(func() { e.p.t, e.p.ins, e.p.ok = t, nil, nil })
}

// takeOut takes out of the outbox the ops that make the tensors ids and
// that no op left in it reads, and returns them in order. An op is left
// too if one left after it frees one of its inputs (a drop, an update
// of a parameter in place): kept pending, it would find it gone.
func (m *Mesh) takeOut(ids map[uint64]bool) []op {
	m.outMu.Lock()
	defer m.outMu.Unlock()
	take := map[uint64]bool{}
	for _, o := range m.out {
		if ids[o.Out] && deferrable(o) {
			take[o.Out] = true
		}
	}
	// From the last op back: an op that stays keeps the ops that make
	// its inputs (before it), and those before it that read what it
	// frees.
	freed := map[uint64]bool{}
	for i := len(m.out) - 1; i >= 0 && len(take) > 0; i-- {
		o := m.out[i]
		if take[o.Out] && !slices.ContainsFunc(o.In, func(id uint64) bool { return freed[id] }) {
			continue
		}
		delete(take, o.Out)
		for _, id := range freedBy(o) {
			freed[id] = true
		}
		for _, in := range o.In {
			delete(take, in) // read by an op that stays: it stays too
		}
	}
	if len(take) == 0 {
		return nil
	}
	var taken, kept []op
	for _, o := range m.out {
		if take[o.Out] {
			taken = append(taken, o)
		} else {
			kept = append(kept, o)
		}
	}
	m.out = kept
	return taken
}

// freedBy is the tensors op o takes out of the store as it runs: a
// drop's inputs, the parameter an update replaces.
func freedBy(o op) []uint64 {
	switch {
	case o.Kind == "drop":
		return o.In
	case o.Kind == "optimize" && len(o.In) > 0:
		return o.In[:1]
	}
	return nil
}

// putBack returns to the outbox, at its end, ops takeOut took that no
// grad op carries after all: no op left there reads them or frees their
// inputs, so they run there as they would have.
func (m *Mesh) putBack(ops []op) {
	if len(ops) == 0 {
		return
	}
	m.outMu.Lock()
	defer m.outMu.Unlock()
	m.keepLocked(ops...)
}
