package main

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/monarch-go/monarch/actorrt"
	"github.com/monarch-go/monarch/ibverbs"
)

// ParameterServer holds weights in a registered buffer and hands out only a
// reference to it.
type ParameterServer struct {
	weights *ibverbs.Buffer
}

func (p *ParameterServer) Init(ctx *actorrt.Context) error {
	var err error
	// 1000 x 1000 float32 weights: 4 MB.
	if p.weights, err = ibverbs.NewBuffer(1000 * 1000 * 4); err != nil {
		return err
	}
	r := rand.New(rand.NewPCG(1, 2))
	w := p.weights.Bytes()
	for i := 0; i < len(w); i += 4 {
		binary.LittleEndian.PutUint32(w[i:], math.Float32bits(r.Float32()))
	}
	return nil
}

// GetWeights returns a small message: just a reference.
func (p *ParameterServer) GetWeights(ctx *actorrt.Context) (ibverbs.Handle, error) {
	return p.weights.Handle(), nil
}

func (p *ParameterServer) Checksum(ctx *actorrt.Context) ([32]byte, error) {
	return sha256.Sum256(p.weights.Bytes()), nil
}

// Worker pulls the weights one-sided: the server's actor is not involved in
// the transfer.
type Worker struct {
	local []byte
}

func (w *Worker) SyncWeights(ctx *actorrt.Context, server *actorrt.ActorMesh[ParameterServer]) (string, error) {
	// Control plane: get the lightweight reference.
	ref, err := actorrt.Method((*ParameterServer).GetWeights).CallOne(server).Get(ctx)
	if err != nil {
		return "", err
	}
	// Data plane: the bulk transfer, when needed.
	w.local = make([]byte, ref.Size)
	if err := ref.ReadInto(ctx, w.local); err != nil {
		return "", err
	}
	sum := sha256.Sum256(w.local)
	return fmt.Sprintf("synced %d bytes via %s, sha256 %x", len(w.local), ref.Backend(), sum[:8]), nil
}

// rdma: Point-to-Point RDMA.
func rdma(ctx context.Context, _ *actorrt.ProcMesh) error {
	heading("Point-to-point RDMA")
	serverProc, err := actorrt.ThisHost(ctx).SpawnProcs(ctx, actorrt.Dims{{"gpus", 1}})
	if err != nil {
		return err
	}
	defer serverProc.Stop(ctx)
	workerProc, err := actorrt.ThisHost(ctx).SpawnProcs(ctx, actorrt.Dims{{"gpus", 1}})
	if err != nil {
		return err
	}
	defer workerProc.Stop(ctx)
	server, err := actorrt.Spawn[ParameterServer](ctx, serverProc, "server")
	if err != nil {
		return err
	}
	worker, err := actorrt.Spawn[Worker](ctx, workerProc, "worker")
	if err != nil {
		return err
	}
	synced, err := actorrt.Method1((*Worker).SyncWeights).CallOne(worker, server).Get(ctx)
	if err != nil {
		return err
	}
	sum, err := actorrt.Method((*ParameterServer).Checksum).CallOne(server).Get(ctx)
	if err != nil {
		return err
	}
	fmt.Printf("worker %s; server's weights sha256 %x\n", synced, sum[:8])
	return nil
}
