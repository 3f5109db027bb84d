package actortest_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/monarch-go/monarch/actorrt"
	"github.com/monarch-go/monarch/actorrt/actortest"
)

// TestLoseHostWithPolicy: the members of a mesh with a restart policy
// whose host is lost are not restarted (there is no agent to start a
// proc in their procs' place): each failure reaches the owner (the
// client's fault hook), naming the host's agent that ended; the members
// on the other host go on.
func TestLoseHostWithPolicy(t *testing.T) {
	c := actortest.Start(t, 2, actorrt.WithHostTimeout(time.Minute))
	ctx, cancel := context.WithTimeout(c.Context(), 30*time.Second)
	defer cancel()
	procs, err := c.Hosts().SpawnProcs(ctx, actorrt.Dims{{"gpus", 2}})
	if err != nil {
		t.Fatal(err)
	}
	policy := actorrt.RestartPolicy{MaxRestarts: 10, Window: time.Minute}
	mesh, err := counters.SpawnWith(ctx, procs, "counters", actorrt.SpawnOptions{Restart: &policy}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.LoseHost(1); err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	for len(seen) < 2 {
		f := nextFailure(t, ctx, c)
		// Its host's agent (c-2, the simulated host) ended with it.
		if f.Mesh != "counters" || f.Coords[0] != 1 || !strings.Contains(f.Reason, "its restart failed") || !strings.Contains(f.Reason, "proc c-2:") {
			t.Fatalf("failure %v: want one of a member of host 1 of mesh counters, saying why it was not restarted", f)
		}
		seen[f.Base] = true
	}
	if _, err := add.Call(mesh.Slice("hosts", 0, 1), 1).Get(ctx); err != nil {
		t.Fatalf("a call to the members of the host left: %v", err)
	}
}
