package jobctl

import (
	"strings"
	"testing"
	"time"
)

const profA = `goroutine 1 [chan receive, 3 minutes]:
main.stacksTestBlockHere({0x1117e20?, 0xc000012345?})
	/src/main.go:30 +0x1d
github.com/monarch-go/monarch/actorrt.(*actor).invoke(0xc0000a2000, 0x2?)
	/src/actorrt/actor.go:566 +0x56b
created by github.com/monarch-go/monarch/actorrt.(*localActors).spawn in goroutine 7
	/src/actorrt/localactors.go:250 +0x2fb

goroutine 9 [select]:
github.com/monarch-go/monarch/bus.(*Conn).Run(0xc000100000)
	/src/bus/conn.go:366 +0x16f
`

const profB = `goroutine 44 [chan receive]:
main.stacksTestBlockHere({0x1117e20?, 0xc000099999?})
	/src/main.go:30 +0x1d
github.com/monarch-go/monarch/actorrt.(*actor).invoke(0xc0000b3000, 0x3?)
	/src/actorrt/actor.go:566 +0x56b
created by github.com/monarch-go/monarch/actorrt.(*localActors).spawn in goroutine 12
	/src/actorrt/localactors.go:250 +0x2fb

goroutine 10 [select]:
github.com/monarch-go/monarch/bus.(*Conn).Run(0xc000200000)
	/src/bus/conn.go:366 +0x16f

goroutine 11 [select]:
github.com/monarch-go/monarch/bus.(*Conn).Run(0xc000300000)
	/src/bus/conn.go:366 +0x16f
`

func TestGroupMasksWhatDiffers(t *testing.T) {
	a := &StacksAnswer{Job: "j", Procs: []ProcStacks{
		{ProcInfo: ProcInfo{Proc: "c-1", Host: "h0", Mesh: "w", Rank: 0}, Goroutines: profA},
		{ProcInfo: ProcInfo{Proc: "c-2", Host: "h0", Mesh: "w", Rank: 1}, Goroutines: profB},
		{ProcInfo: ProcInfo{Proc: "c-3", Host: "h1", Mesh: "w", Rank: 2}, Goroutines: profA},
		{ProcInfo: ProcInfo{Proc: "c-4", Host: "h1", Mesh: "w", Rank: 3, Missing: "no answer within 1s"}},
	}}
	g := Group(a)
	if len(g) != 2 {
		t.Fatalf("%d groups, want 2: %+v", len(g), g)
	}
	// The endpoint's group first, though no more procs have it.
	if g[0].State != "chan receive" || !strings.Contains(g[0].Stack, "main.stacksTestBlockHere(...)\n") ||
		strings.Contains(g[0].Stack, "goroutine 7") || len(g[0].Procs) != 3 || g[0].Goroutines() != 3 {
		t.Errorf("first group: %+v", g[0])
	}
	if g[1].State != "select" || len(g[1].Procs) != 3 || g[1].Counts[1] != 2 || g[1].Goroutines() != 4 {
		t.Errorf("second group: %+v", g[1])
	}
	var b strings.Builder
	now := time.Now()
	a.Procs[0].Actors = []ActorState{{Actor: "b[0]", Endpoint: "Block", Since: now.Add(-1500 * time.Millisecond)}, {Actor: "x[0]"}}
	Format(&b, a, now)
	out := b.String()
	for _, want := range []string{
		"job j: stacks of 3 of 4 procs\n",
		"\n== w 0-2 (3 procs): 1 goroutine each [chan receive]\nmain.stacksTestBlockHere(...)\n\t/src/main.go:30 +0x1d\n",
		"\n== w 0-2 (3 procs): 4 goroutines [select]\n",
		"\n== running actors\nw 0 (c-1 on h0): b[0] Block for 1.5s\n",
		"\n== procs without stacks\nw 3 (c-4 on h1): no answer within 1s\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("Format lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "x[0]") {
		t.Errorf("an idle actor is listed:\n%s", out)
	}
}

func TestRankRanges(t *testing.T) {
	for _, tt := range []struct {
		in   []int
		want string
	}{{[]int{0}, "0"}, {[]int{0, 1, 2, 3}, "0-3"}, {[]int{0, 1, 3, 5, 6}, "0-1,3,5-6"}} {
		if got := rankRanges(tt.in); got != tt.want {
			t.Errorf("rankRanges(%v) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
