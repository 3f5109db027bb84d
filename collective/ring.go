package collective

import (
	"context"
	"fmt"
)

// Number is an element type of a collective.
type Number interface {
	~float32 | ~float64 | ~int32 | ~int64
}

// Op is how all-reduce and reduce-scatter combine the members' values.
type Op int

const (
	Sum Op = iota
	Mean
	Max
	Min
)

func (op Op) String() string {
	switch op {
	case Sum:
		return "sum"
	case Mean:
		return "mean"
	case Max:
		return "max"
	case Min:
		return "min"
	}
	return fmt.Sprintf("Op(%d)", int(op))
}

// reduce combines src into dst, element by element (as far as both go).
// Sums of float32 and float64, the common case and the costliest part
// of a large all-reduce after the copies, take a vector loop (addFloat32s).
func reduce[T Number](op Op, dst, src []T) {
	src = src[:min(len(src), len(dst))]
	switch op {
	case Sum, Mean:
		var zero T
		switch any(zero).(type) {
		case float32:
			addFloat32s(as[float32](bytesOf(dst)), as[float32](bytesOf(src)))
		case float64:
			addFloat64s(as[float64](bytesOf(dst)), as[float64](bytesOf(src)))
		default:
			addLoop(dst, src)
		}
	case Max:
		for i, v := range src {
			dst[i] = max(dst[i], v)
		}
	case Min:
		for i, v := range src {
			dst[i] = min(dst[i], v)
		}
	}
}

// addLoop adds src into dst, element by element, as far as both go.
func addLoop[T Number](dst, src []T) {
	src = src[:min(len(src), len(dst))]
	for i, v := range src {
		dst[i] += v
	}
}

// chunk is the i-th of size nearly equal parts of n elements.
func chunk(n, size, i int) (lo, hi int) { return i * n / size, (i + 1) * n / size }

func mod(a, n int) int { return ((a % n) + n) % n }

// start finds the group and takes its member for one collective.
func start(c *Comm, dim string, op Op) (*group, func(), error) {
	if c == nil {
		return nil, nil, fmt.Errorf("collective: nil communicator")
	}
	if op < Sum || op > Min {
		return nil, nil, fmt.Errorf("collective: unknown op %v", op)
	}
	g, err := groupOf(c, dim)
	if err != nil {
		return nil, nil, err
	}
	g.l.mu.Lock()
	return g, g.l.mu.Unlock, nil
}

// AllReduce combines data across the members of this proc's group along
// dim, in place: every member ends with the combination of all. Every
// member passes the same length.
func AllReduce[T Number](ctx context.Context, c *Comm, dim string, data []T, op Op) error {
	g, done, err := start(c, dim, op)
	if err != nil {
		return err
	}
	defer done()
	me := call{kind: kindAllReduce, op: op, bytes: len(bytesOf(data))}
	if g.direct(me.bytes) {
		if err := allReduceDirect(ctx, g, me, data, op); err != nil {
			return err
		}
	} else {
		if err := g.check(ctx, me); err != nil {
			return err
		}
		if err := g.ring(ctx, append(reduceScatterSteps(g, data, op), allGatherSteps(g, data)...)); err != nil {
			return err
		}
	}
	if op == Mean {
		for i := range data {
			data[i] /= T(g.size)
		}
	}
	return nil
}

// ReduceScatter combines data across the group along dim and returns this
// member's part of the result: the place-th of size nearly equal parts
// (place is the proc's index along dim). data is used as scratch.
func ReduceScatter[T Number](ctx context.Context, c *Comm, dim string, data []T, op Op) ([]T, error) {
	g, done, err := start(c, dim, op)
	if err != nil {
		return nil, err
	}
	defer done()
	me := call{kind: kindReduceScatter, op: op, bytes: len(bytesOf(data))}
	var out []T
	if g.direct(me.bytes) {
		if out, err = reduceScatterDirect(ctx, g, me, data, op); err != nil {
			return nil, err
		}
	} else {
		if err := g.check(ctx, me); err != nil {
			return nil, err
		}
		if err := g.ring(ctx, reduceScatterSteps(g, data, op)); err != nil {
			return nil, err
		}
		lo, hi := chunk(len(data), g.size, g.me)
		out = append([]T(nil), data[lo:hi]...)
	}
	if op == Mean {
		for i := range out {
			out[i] /= T(g.size)
		}
	}
	return out, nil
}

// AllGather returns the members' parts along dim, in order of their
// index: every member passes a part of the same length.
func AllGather[T Number](ctx context.Context, c *Comm, dim string, part []T) ([]T, error) {
	g, done, err := start(c, dim, Sum)
	if err != nil {
		return nil, err
	}
	defer done()
	out := make([]T, len(part)*g.size)
	me := call{kind: kindAllGather, bytes: len(bytesOf(part))}
	if g.direct(me.bytes) {
		if err := allGatherDirect(ctx, g, me, part, out); err != nil {
			return nil, err
		}
		return out, nil
	}
	if err := g.check(ctx, me); err != nil {
		return nil, err
	}
	copy(out[g.me*len(part):], part)
	if err := g.ring(ctx, allGatherSteps(g, out)); err != nil {
		return nil, err
	}
	return out, nil
}

// Broadcast copies data of the member at index root along dim into every
// other member's data, in place. Every member passes the same length.
func Broadcast[T Number](ctx context.Context, c *Comm, dim string, root int, data []T) error {
	g, done, err := start(c, dim, Sum)
	if err != nil {
		return err
	}
	defer done()
	if root < 0 || root >= g.size {
		return fmt.Errorf("collective: broadcast from index %d of a dimension of %d", root, g.size)
	}
	if g.size == 1 {
		return nil
	}
	me := call{kind: kindBroadcast, root: root, bytes: len(bytesOf(data))}
	if g.direct(me.bytes) {
		return broadcastDirect(ctx, g, me, root, data)
	}
	if err := g.check(ctx, me); err != nil {
		return err
	}
	b := bytesOf(data)
	// Down the ring from root: each receives, then passes it on, but the
	// last.
	return g.guarded(ctx, func(ctx context.Context) error {
		if g.me != root {
			if err := g.recv(ctx, b, nil, nil); err != nil {
				return err
			}
		}
		if mod(g.me+1, g.size) == root {
			return nil
		}
		return g.send(ctx, [][]byte{b}, nil)
	})
}

// reduceScatterSteps are the ring's first half: after size-1 steps
// member place holds the combination of every member's chunk place.
func reduceScatterSteps[T Number](g *group, data []T, op Op) []step {
	var steps []step
	for k := 0; k < g.size-1; k++ {
		slo, shi := chunk(len(data), g.size, mod(g.me-k-1, g.size))
		rlo, rhi := chunk(len(data), g.size, mod(g.me-k-2, g.size))
		steps = append(steps, step{bytesOf(data[slo:shi]), bytesOf(data[rlo:rhi]), func(dst, piece []byte) {
			reduce(op, as[T](dst), as[T](piece))
		}})
	}
	return steps
}

// allGatherSteps are the ring's second half: member place holds chunk
// place; after size-1 steps every member holds every chunk.
func allGatherSteps[T Number](g *group, data []T) []step {
	var steps []step
	for k := 0; k < g.size-1; k++ {
		slo, shi := chunk(len(data), g.size, mod(g.me-k, g.size))
		rlo, rhi := chunk(len(data), g.size, mod(g.me-k-1, g.size))
		steps = append(steps, step{bytesOf(data[slo:shi]), bytesOf(data[rlo:rhi]), nil})
	}
	return steps
}
