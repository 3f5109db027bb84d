package actorrt_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/monarch-go/monarch/actorrt"
	"github.com/monarch-go/monarch/internal/jobctl"
)

// TestFeedOwnedInProcs: a member of a mesh owned by an actor in another
// proc fails and its owner handles it: the client's supervision never
// hears of it, yet the state feed shows it failed with its reason, as its
// proc says; its owner and the other member show running.
func TestFeedOwnedInProcs(t *testing.T) {
	inProcess(t)
	ctx := testCtx(t)
	procs := spawnProcs(t, actorrt.Dims{{"gpus", 2}})
	sup := spawn[Supervisor](t, procs.At("gpus", 0), "feed-owner", true)
	if _, err := actorrt.VoidMethod2((*Supervisor).SpawnWorkers).CallOne(sup, procs, "feed-owned").Get(ctx); err != nil {
		t.Fatal(err)
	}
	workers, err := actorrt.Method((*Supervisor).Workers).CallOne(sup).Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := actorrt.VoidMethod1((*Echo).Fail).Broadcast(workers.At("gpus", 1), "feed worker broke"); err != nil {
		t.Fatal(err)
	}
	var s *jobctl.JobState
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		s = clientState(t, ctx)
		if m := feedMesh(s, "feed-owned"); m != nil && m.Members[1].State == "failed" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("feed-owned member 1 not failed within 30s: %+v", feedMesh(s, "feed-owned"))
		}
	}
	m := feedMesh(s, "feed-owned")
	if mem := m.Members[1]; !strings.Contains(mem.Reason, "feed worker broke") {
		t.Errorf("member 1: %+v; want its reason", mem)
	}
	if mem := m.Members[0]; mem.State != "running" {
		t.Errorf("member 0: %+v; want running", mem)
	}
	if o := feedMesh(s, "feed-owner"); o == nil || o.Members[0].State != "running" {
		t.Errorf("owner: %+v; want running", o)
	}
	assertNoFailure(t, "feed-owner")
}

func feedMesh(s *jobctl.JobState, name string) *jobctl.ActorMeshState {
	for i := range s.ActorMeshes {
		if s.ActorMeshes[i].Name == name {
			return &s.ActorMeshes[i]
		}
	}
	return nil
}

// clientState is the client's job state feed.
func clientState(t *testing.T, ctx context.Context) *jobctl.JobState {
	t.Helper()
	s, err := actorrt.ClientState(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
