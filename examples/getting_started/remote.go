package main

import (
	"context"
	"fmt"
	"os"

	"github.com/monarch-go/monarch/actorrt"
	"github.com/shirou/gopsutil/v4/process"
)

// Memory is a proc's memory use.
type Memory struct {
	PID int
	RSS uint64
	VMS uint64
}

func (m Memory) String() string {
	return fmt.Sprintf("pid %d rss=%.1fMiB vms=%.1fMiB", m.PID, float64(m.RSS)/(1<<20), float64(m.VMS)/(1<<20))
}

// checkMemory is the guide's check_memory, registered in every process of
// the program by this package-level var.
var checkMemory = actorrt.Remote("check_memory", func(ctx context.Context) (Memory, error) {
	p, err := process.NewProcessWithContext(ctx, int32(os.Getpid()))
	if err != nil {
		return Memory{}, err
	}
	mi, err := p.MemoryInfoWithContext(ctx)
	if err != nil {
		return Memory{}, err
	}
	return Memory{PID: os.Getpid(), RSS: mi.RSS, VMS: mi.VMS}, nil
})

// remoteFunctions: Free Remote Functions.
func remoteFunctions(ctx context.Context, trainerProcs *actorrt.ProcMesh) error {
	heading("Free remote functions")
	mem, err := checkMemory.Call(trainerProcs).Get(ctx)
	if err != nil {
		return err
	}
	fmt.Println(mem)
	return nil
}
