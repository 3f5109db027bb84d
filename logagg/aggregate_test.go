package logagg_test

import (
	"testing"

	"github.com/monarch-go/monarch/logagg"
)

func out(rank int, text string) logagg.Line {
	return logagg.Line{Rank: rank, Stream: logagg.Stdout, Text: text}
}

func errLine(rank int, text string) logagg.Line {
	return logagg.Line{Rank: rank, Stream: logagg.Stderr, Text: text}
}

func TestAggregatorGroups(t *testing.T) {
	a := logagg.NewAggregator()
	in := []logagg.Line{
		out(0, "step 1 loss=0.5"),
		out(1, "epoch 3 done"),
		out(1, "step 1 loss=0.4"),
		errLine(2, "step 1 loss=0.5"), // same text, other stream
		out(2, "epoch 3 failed"),
		out(0, "step 2 loss=0.3"),
		out(3, "epoch 4 done"),
	}
	for i, l := range in {
		a.Add(l)
		if a.Pending() != i+1 {
			t.Fatalf("Pending = %d after %d lines", a.Pending(), i+1)
		}
	}
	got := a.Flush()
	want := []struct {
		count, ranks, firstRank int
		stream                  logagg.Stream
		first                   string
	}{
		{3, 2, 0, logagg.Stdout, "step 1 loss=0.5"},
		{2, 2, 1, logagg.Stdout, "epoch 3 done"},
		{1, 1, 2, logagg.Stderr, "step 1 loss=0.5"},
		{1, 1, 2, logagg.Stdout, "epoch 3 failed"},
	}
	if len(got) != len(want) {
		t.Fatalf("%d groups, want %d: %+v", len(got), len(want), got)
	}
	for i, w := range want {
		g := got[i]
		if g.Count != w.count || g.Ranks != w.ranks || g.First.Rank != w.firstRank || g.First.Stream != w.stream || g.First.Text != w.first {
			t.Errorf("group %d = %+v, want %+v", i, g, w)
		}
	}
	if a.Pending() != 0 {
		t.Errorf("Pending = %d after Flush", a.Pending())
	}
	if g := a.Flush(); g != nil {
		t.Errorf("second Flush = %+v, want nil", g)
	}
	// A new window starts empty: the first line of a known template opens
	// a group again and is its First.
	a.Add(out(9, "step 7 loss=0.1"))
	if g := a.Flush(); len(g) != 1 || g[0].Count != 1 || g[0].First.Text != "step 7 loss=0.1" || g[0].Ranks != 1 {
		t.Errorf("after reset: %+v", g)
	}
}

func TestAggregatorRanks(t *testing.T) {
	a := logagg.NewAggregator()
	for _, r := range []int{5, 5, 0, 5, 700, 0, -1, 1 << 20, -1, 1 << 20, 65535, 65536, 63, 64} {
		a.Add(out(r, "tick 1"))
	}
	g := a.Flush()
	if len(g) != 1 || g[0].Count != 14 || g[0].Ranks != 9 {
		t.Fatalf("got %+v, want one group of 14 lines from 9 ranks", g)
	}
}

// Counts add up over a large corpus, and a window with more groups than
// the Aggregator reuses leaves it working.
func TestAggregatorCorpus(t *testing.T) {
	lines := benchCorpus(20000)
	a := logagg.NewAggregator()
	for range 2 {
		for _, l := range lines {
			a.Add(l)
		}
		for i := range 5000 {
			a.Add(out(i, "unique "+string(rune('a'+i%26))+string(rune('a'+i/26%26))+string(rune('a'+i/676))))
		}
		total := 0
		seen := map[string]bool{}
		for _, g := range a.Flush() {
			total += g.Count
			key := g.First.Stream.String() + logagg.Template(g.First.Text)
			if seen[key] {
				t.Fatalf("two groups for %q", key)
			}
			seen[key] = true
			if g.Ranks < 1 || g.Ranks > g.Count {
				t.Fatalf("group %+v: ranks out of range", g)
			}
		}
		if total != len(lines)+5000 {
			t.Fatalf("counts add up to %d, want %d", total, len(lines)+5000)
		}
	}
}

func BenchmarkAggregatorAdd(b *testing.B) {
	lines := benchCorpus(4096)
	a := logagg.NewAggregator()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		a.Add(lines[i%len(lines)])
		if i++; i%len(lines) == 0 {
			a.Flush()
		}
	}
}
