package dtensor

import (
	"context"
	"fmt"
	"sync"

	"github.com/monarch-go/monarch/actorrt"
	"github.com/monarch-go/monarch/ibverbs"
	"gorgonia.org/tensor"
)

// Moving a tensor to another mesh: each shard goes from its proc to the
// proc of the same rank of the other mesh, one-sided (ibverbs), not
// through this process. The source procs register their shards' memory
// (export), the destination procs read it (the op "import"), and once
// every destination holds its shard the source procs let their buffers
// go.

// exported holds this proc's shards registered for reading, by tensor.
var exported = struct {
	sync.Mutex
	m map[uint64]*ibverbs.Buffer
}{m: map[uint64]*ibverbs.Buffer{}}

var exportFn = actorrt.Remote1("monarch_dtensor_export", func(ctx context.Context, id uint64) (ibverbs.Handle, error) {
	t, err := await(id)
	if err != nil {
		return ibverbs.Handle{}, err
	}
	_, raw := rawOf(t)
	b, err := ibverbs.Register(raw)
	if err != nil {
		return ibverbs.Handle{}, err
	}
	exported.Lock()
	defer exported.Unlock()
	if old := exported.m[id]; old != nil {
		old.Close()
	}
	exported.m[id] = b
	return b.Handle(), nil
})

var unexportFn = actorrt.Remote1("monarch_dtensor_unexport", func(ctx context.Context, id uint64) (actorrt.Void, error) {
	exported.Lock()
	b := exported.m[id]
	delete(exported.m, id)
	exported.Unlock()
	if b != nil {
		b.Close()
	}
	return actorrt.Void{}, nil
})

var awaitFn = actorrt.Remote1("monarch_dtensor_await", func(ctx context.Context, id uint64) (actorrt.Void, error) {
	_, err := await(id)
	return actorrt.Void{}, err
})

// ToMesh moves t to dst, a mesh of the same extent: shard r goes from
// rank r of t's mesh to rank r of dst, proc to proc. It returns once
// every shard has arrived.
func ToMesh(ctx context.Context, t *Tensor, dst *Mesh) (*Tensor, error) {
	if err := t.usable("import"); err != nil {
		return nil, err
	}
	if !t.mesh.Extent().Equal(dst.Extent()) {
		return nil, fmt.Errorf("%w: to a mesh of %v from one of %v", ErrShape, dst.Extent(), t.mesh.Extent())
	}
	if err := t.mesh.flush(); err != nil {
		return nil, err
	}
	hs, err := exportFn.Call(t.mesh.procs, t.id).Get(ctx)
	if err != nil {
		return nil, fmt.Errorf("dtensor: ToMesh: %w", err)
	}
	defer func() { unexportFn.Call(t.mesh.procs, t.id).Get(context.WithoutCancel(ctx)) }()
	handles := hs.Values()
	out, err := dst.record(op{Kind: "import", Shape: t.shape, DType: t.dtype}, nil, func(r int, o *op) { o.Handle = &handles[r] })
	if err != nil {
		return nil, err
	}
	if _, err := awaitFn.Call(dst.procs, out.id).Get(ctx); err != nil {
		return nil, fmt.Errorf("dtensor: ToMesh: %w", err)
	}
	return out, nil
}

// importShard is the op "import": this proc's shard, read from the
// source proc's registered memory.
func importShard(ctx context.Context, o op, _ []*tensor.Dense) (*tensor.Dense, error) {
	if o.Handle == nil {
		return nil, fmt.Errorf("dtensor: import without a handle")
	}
	size := 8
	if o.DType == Float32 {
		size = 4
	}
	raw := make([]byte, size*product(o.Shape))
	if err := o.Handle.ReadAt(ctx, raw, 0); err != nil {
		return nil, fmt.Errorf("dtensor: import: %w", err)
	}
	return denseOf(o.DType, o.Shape, raw)
}
