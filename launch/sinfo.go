package launch

import (
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// What Slurm says of its partitions (sinfo), to tell a user why a
// request cannot be met, or could not be in time: how many nodes a
// partition has, in which states, and its time limit.

// sinfoWait bounds one sinfo call: a slurmctld that does not answer must
// not hold up a launch that salloc would fail anyway.
const sinfoWait = 10 * time.Second

// partition is one partition as sinfo shows it.
type partition struct {
	name      string
	isDefault bool   // the partition a request naming none goes to
	avail     string // "up", "down", "drain", "inact"
	maxTime   string // "infinite", "1-00:00:00"
	groups    []nodeGroup
}

// nodeGroup is nodes of a partition in one state, for one reason.
type nodeGroup struct {
	count  int
	state  string // "idle", "allocated", "drained", "down*"...
	nodes  string // a Slurm hostlist: h[1-2]
	reason string // why drained or down; "" for none
}

// sinfoFormat is the output format sinfoPartitions parses: a line per
// partition and node state.
const sinfoFormat = "%P|%a|%l|%D|%T|%N|%E"

// sinfoPartitions asks sinfo for every partition, once, bounded by
// sinfoWait.
func sinfoPartitions(ctx context.Context) ([]partition, error) {
	ctx, cancel := context.WithTimeout(ctx, sinfoWait)
	defer cancel()
	out, err := exec.CommandContext(ctx, "sinfo", "-h", "-o", sinfoFormat).Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok && len(ee.Stderr) > 0 {
			return nil, fmt.Errorf("sinfo: %v: %s", err, strings.TrimSpace(string(ee.Stderr)))
		}
		return nil, fmt.Errorf("sinfo: %w", err)
	}
	return parseSinfo(string(out))
}

// parseSinfo reads sinfo's output in sinfoFormat; partitions in the order
// sinfo lists them.
func parseSinfo(out string) ([]partition, error) {
	var parts []partition
	index := map[string]int{}
	for n, line := range strings.Split(out, "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		f := strings.SplitN(line, "|", 7)
		if len(f) != 7 {
			return nil, fmt.Errorf("sinfo line %d: %d fields in %q, want 7 (%s)", n+1, len(f), line, sinfoFormat)
		}
		count, err := strconv.Atoi(strings.TrimSpace(f[3]))
		if err != nil || count < 0 {
			return nil, fmt.Errorf("sinfo line %d: node count %q", n+1, f[3])
		}
		name, isDefault := strings.CutSuffix(f[0], "*")
		i, ok := index[name]
		if !ok {
			i = len(parts)
			index[name] = i
			parts = append(parts, partition{name: name, isDefault: isDefault, avail: f[1], maxTime: f[2]})
		}
		reason := f[6]
		if reason == "none" {
			reason = ""
		}
		parts[i].groups = append(parts[i].groups, nodeGroup{count: count, state: f[4], nodes: f[5], reason: reason})
	}
	return parts, nil
}

// findPartition is the partition named name, or the default one for "".
func findPartition(parts []partition, name string) (partition, bool) {
	for _, p := range parts {
		if (name == "" && p.isDefault) || (name != "" && p.name == name) {
			return p, true
		}
	}
	return partition{}, false
}

// nodes is how many nodes p has.
func (p partition) nodes() int {
	n := 0
	for _, g := range p.groups {
		n += g.count
	}
	return n
}

// usable is how many of p's nodes could run a job now or soon: those not
// drained, draining, down, failing or in maintenance.
func (p partition) usable() int {
	n := 0
	for _, g := range p.groups {
		if !nodeUnusable(g.state) {
			n += g.count
		}
	}
	return n
}

// nodeUnusable tells the node states (sinfo %T) that take a node out of
// service until someone acts.
func nodeUnusable(state string) bool {
	s := strings.TrimRight(state, "*~#!%$@^-")
	for _, bad := range []string{"drain", "down", "fail", "maint", "inval", "future", "reboot", "power"} {
		if strings.HasPrefix(s, bad) {
			return true
		}
	}
	return strings.HasSuffix(state, "*") // not responding
}

// String says what p has: "partition debug has 2 nodes (h1: idle; h2:
// drained, test), time limit infinite".
func (p partition) String() string {
	var groups []string
	for _, g := range p.groups {
		s := g.nodes + ": " + g.state
		if g.reason != "" {
			s += " (" + g.reason + ")"
		}
		groups = append(groups, s)
	}
	s := fmt.Sprintf("partition %s has %d node%s (%s), time limit %s", p.name, p.nodes(), plural(p.nodes()), strings.Join(groups, "; "), p.maxTime)
	if p.avail != "up" && p.avail != "" {
		s += ", and is " + p.avail
	}
	return s
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// partitionNames lists parts' names, the default marked as sinfo does.
func partitionNames(parts []partition) string {
	var names []string
	for _, p := range parts {
		n := p.name
		if p.isDefault {
			n += " (default)"
		}
		names = append(names, n)
	}
	return strings.Join(names, ", ")
}
