package main

import (
	"context"
	"fmt"

	"github.com/monarch-go/monarch/actorrt"
)

// channels: Channels and Low-level messaging. A channel's port can be
// used here, or sent anywhere; Send asks every proc (or actor) to answer
// on it.
func channels(ctx context.Context, trainerProcs *actorrt.ProcMesh) error {
	heading("Channels and low-level messaging")
	port, recv := actorrt.OpenChannel[int](ctx)
	if err := port.Send(3); err != nil {
		return err
	}
	v, err := recv.Recv().Get(ctx)
	if err != nil {
		return err
	}
	fmt.Println(v)
	recv.Close()

	memPort, memRecv := actorrt.OpenChannel[Memory](ctx)
	defer memRecv.Close()
	if err := checkMemory.Send(trainerProcs, memPort); err != nil {
		return err
	}
	for i := 0; i < trainerProcs.Extent().NumRanks(); i++ {
		m, err := memRecv.Recv().Get(ctx)
		if err != nil {
			return err
		}
		fmt.Println(m)
	}
	return nil
}
