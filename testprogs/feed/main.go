// Command feed is a job program for the job state feed's tests: on each of
// the job's hosts it starts 2 procs (a mesh named workers) with one
// Pinger each (the actor mesh pingers, owned by the client), prints
// "PID rank=R pid=P" for each member, makes member 1 fail (its endpoint
// Fail returns an error no caller waits for: the client's fault hook
// hears of it, prints "FAULT ..." and carries on), prints READY, then
// calls Ping on member 0 until the job is stopped.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/monarch-go/monarch/actorrt"
)

// Pinger counts pings and fails on request.
type Pinger struct{ pings int }

// Ping counts one ping.
func (p *Pinger) Ping(ctx *actorrt.Context) error { p.pings++; return nil }

// PID is the proc's pid.
func (p *Pinger) PID(ctx *actorrt.Context) (int, error) { return os.Getpid(), nil }

// Fail fails the member.
func (p *Pinger) Fail(ctx *actorrt.Context) error {
	return errors.New("feedTestFailure: failed on purpose")
}

func main() {
	if err := actorrt.Register[Pinger](); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	hook := actorrt.WithFaultHook(func(f *actorrt.MeshFailure) error {
		fmt.Println("FAULT", f)
		return nil
	})
	actorrt.Main(func(ctx context.Context) error {
		hosts, err := actorrt.HostsFromConfig(ctx, "MONARCH_HOSTS")
		if err != nil {
			return err
		}
		procs, err := hosts.SpawnProcs(ctx, actorrt.Dims{{"gpus", 2}}, actorrt.WithName("workers"))
		if err != nil {
			return err
		}
		m, err := actorrt.Spawn[Pinger](ctx, procs, "pingers")
		if err != nil {
			return err
		}
		pids, err := actorrt.Method((*Pinger).PID).Call(m).Get(ctx)
		if err != nil {
			return err
		}
		for i, pid := range pids.Values() {
			fmt.Printf("PID rank=%d pid=%d\n", i, pid)
		}
		if err := actorrt.VoidMethod((*Pinger).Ping).Broadcast(m); err != nil {
			return err
		}
		// A call to a slice of several members (host 1's): it counts
		// in each one's sent.
		if err := actorrt.VoidMethod((*Pinger).Ping).Broadcast(m.At("hosts", 1)); err != nil {
			return err
		}
		pt0, _ := m.Extent().Point(0)
		pt1, _ := m.Extent().Point(1)
		one := m.SliceAt(pt1)
		if err := actorrt.VoidMethod((*Pinger).Fail).Broadcast(one); err != nil {
			return err
		}
		fmt.Println("READY")
		first := m.SliceAt(pt0)
		for ctx.Err() == nil {
			actorrt.VoidMethod((*Pinger).Ping).Broadcast(first)
			select {
			case <-ctx.Done():
			case <-time.After(10 * time.Millisecond):
			}
		}
		return nil
	}, hook)
}
