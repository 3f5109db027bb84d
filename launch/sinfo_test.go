package launch

import (
	"context"
	"strings"
	"testing"

	"github.com/monarch-go/monarch/hostsconfig"
)

func TestParseSinfo(t *testing.T) {
	// sinfo -h -o '%P|%a|%l|%D|%T|%N|%E' on the test cluster, h2 drained.
	out := "debug*|up|infinite|1|drained|h2|test\ndebug*|up|infinite|1|idle|h1|none\ngpu|up|1-00:00:00|4|idle|g[1-4]|none\n"
	parts, err := parseSinfo(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(parts) != 2 || partitionNames(parts) != "debug (default), gpu" {
		t.Fatalf("partitions %+v", parts)
	}
	def, ok := findPartition(parts, "")
	if !ok || def.name != "debug" || def.nodes() != 2 || def.usable() != 1 {
		t.Fatalf("default partition %+v: %d nodes, %d usable", def, def.nodes(), def.usable())
	}
	if got, want := def.String(), "partition debug has 2 nodes (h2: drained (test); h1: idle), time limit infinite"; got != want {
		t.Errorf("String %q, want %q", got, want)
	}
	gpu, ok := findPartition(parts, "gpu")
	if !ok || gpu.nodes() != 4 || gpu.maxTime != "1-00:00:00" {
		t.Errorf("gpu %+v", gpu)
	}
	if _, ok := findPartition(parts, "nosuch"); ok {
		t.Error("found a partition sinfo did not list")
	}
	for _, bad := range []string{"debug*|up|infinite|x|idle|h1|none", "debug*|up|infinite"} {
		if _, err := parseSinfo(bad); err == nil || !strings.Contains(err.Error(), "sinfo line 1") {
			t.Errorf("%q: %v, want an error naming the line", bad, err)
		}
	}
}

func TestNodeUnusable(t *testing.T) {
	for state, want := range map[string]bool{"idle": false, "mixed": false, "allocated": false, "drained": true, "draining": true,
		"down*": true, "idle*": true, "maint": true, "fail": true, "completing": false, "reserved": false} {
		if got := nodeUnusable(state); got != want {
			t.Errorf("%s: unusable %v, want %v", state, got, want)
		}
	}
}

// TestSlurmFits: a request for more nodes than the partition has is
// refused before salloc, naming the key, where it is, and the partition.
func TestSlurmFits(t *testing.T) {
	parts, err := parseSinfo("debug*|up|infinite|2|idle|h[1-2]|none\n")
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		nodes     int
		partition string
		want      string
	}{
		{2, "", ""},
		{3, "", "slurm: [slurm] nodes = 3: partition debug has 2 nodes (h[1-2]: idle), time limit infinite"},
		{3, "nosuch", ""}, // salloc says so
	} {
		s := slurmHosts{slurmScheduler: slurmScheduler{cfgOf(tt.nodes, tt.partition)}}
		err := s.fits(parts)
		if (err == nil) != (tt.want == "") || (err != nil && err.Error() != tt.want) {
			t.Errorf("nodes %d partition %q: %v, want %q", tt.nodes, tt.partition, err, tt.want)
		}
	}
	if err := (slurmHosts{slurmScheduler: slurmScheduler{cfgOf(9, "")}}).fits(nil); err != nil {
		t.Errorf("without sinfo: %v", err)
	}
}

func cfgOf(nodes int, partition string) *hostsconfig.Slurm {
	return &hostsconfig.Slurm{Nodes: nodes, Partition: partition}
}

// TestAllocFailed: salloc's and sbatch's errors, said in the hosts
// file's terms (what sinfo adds depends on where the test runs).
func TestAllocFailed(t *testing.T) {
	s := slurmHosts{slurmScheduler: slurmScheduler{&hostsconfig.Slurm{Nodes: 3, Partition: "gpu"}}}
	for _, tt := range []struct {
		tool  string
		lines []string
		want  string
	}{
		{"sbatch", []string{"sbatch: error: Batch job submission failed: Node count specification invalid"},
			"slurm: Slurm refused the allocation ([slurm] nodes = 3): Node count specification invalid"},
		{"salloc", []string{"salloc: error: Job submit/allocate failed: Requested time limit is invalid (missing or exceeds some limit)"},
			"slurm: Slurm refused the allocation ([slurm] nodes = 3): Requested time limit is invalid"},
		{"salloc", []string{"salloc: error: invalid partition specified: gpu", "salloc: error: Job submit/allocate failed: Invalid partition name specified"},
			`slurm: [slurm] partition = "gpu": Slurm has no such partition (invalid partition)`},
		{"salloc", []string{"salloc: Pending job allocation 12", "salloc: error: Unable to allocate resources: Connection timed out"},
			`slurm: no allocation within [slurm] immediate = "30s" (the default) for [slurm] nodes = 3 (Connection timed out)`},
	} {
		err := s.allocFailed(context.Background(), tt.tool, tt.lines)
		if err == nil || !strings.HasPrefix(err.Error(), tt.want) || !strings.HasSuffix(err.Error(), "\n  "+tt.tool+" said:\n    "+strings.Join(tt.lines, "\n    ")) {
			t.Errorf("%q: %v\nwant %q, then the lines", tt.lines, err, tt.want)
		}
	}
	if err := s.allocFailed(context.Background(), "salloc", []string{"salloc: Granted job allocation 12"}); err != nil {
		t.Errorf("a granted allocation: %v", err)
	}
}
