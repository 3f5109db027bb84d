package launch

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/monarch-go/monarch/internal/bincache"
	"github.com/monarch-go/monarch/internal/jobenv"
)

// Shipping on Slurm, inside the allocation, before the agents' step: an
// srun step runs bincache's check on every node of the allocation (sbcast
// sends to all of them); what some node lacks is sent to all by sbcast,
// into the part bincache names in the cache, and a second step settles
// it there (checks it and renames it into place). The agents' step is
// one command line for all nodes, so every node runs a binary from the
// same path: its cached copy, whose path must be the same on every node.
//
// A check that fails, a node without the binary when sbcast is not in
// PATH, and an sbcast that fails, fail the launch: nothing runs from a
// path unchecked.

// ship makes the nodes of this allocation have s.bins in their caches,
// and records in s.at (one row: all nodes alike) the path each runs from.
func (sh slurmHosts) ship(ctx context.Context, s *shipment) error {
	if s == nil {
		return nil
	}
	nodes, err := allocationNodes()
	if err != nil {
		return fmt.Errorf("slurm: %w", err)
	}
	start := time.Now()
	rs, err := sh.shipStep(ctx, len(nodes), bincache.CheckArgv(s.cache, s.mode(), s.bins, s.paths))
	if err != nil {
		if failed := launchFailed(err, nodes); failed != nil {
			return failed // the agents' step would fail alike: say it now
		}
		return fmt.Errorf("slurm: could not check the binary cache of the nodes (%v), and nothing runs unchecked: "+
			"see that a step runs on every node (srun -N%d true)", err, len(nodes))
	}
	c, err := s.readCheck(rs, nodes)
	if err != nil {
		return err
	}
	at := make([]string, len(s.bins))
	var send []int
	for i := range s.bins {
		if len(c.have[i]) == len(nodes) {
			for _, e := range c.have[i] {
				at[i] = e // the same on every node: one dir
			}
			continue
		}
		send = append(send, i)
		if len(c.untrusted[i]) > 0 {
			slices.Sort(c.untrusted[i])
			s.say("%s at %s is not taken from there (%s); sending it", s.named(i), s.paths[i], strings.Join(c.untrusted[i], "; "))
		}
	}
	for _, r := range c.refused {
		then := "copying it from " + s.paths[r.Index]
		if slices.Contains(send, r.Index) {
			then = sendingAgain
		}
		s.refused(r.Host, r.Index, r, then)
	}
	s.at = [][]string{at}
	if len(send) == 0 {
		return nil
	}
	if _, err := exec.LookPath("sbcast"); err != nil {
		return fmt.Errorf("slurm: sbcast is not in PATH, and %s: put sbcast in PATH, or the binaries at %s on every node, "+
			"in folders only you can write, to be copied from there", s.lacking(send, c.have, nodes), strings.Join(s.paths, ", "))
	}
	tag := os.Getenv("SLURM_JOB_ID") + "-" + strconv.Itoa(os.Getpid())
	for attempt := 1; len(send) > 0; attempt++ {
		for _, i := range send {
			part := bincache.Part(c.dir, s.bins[i], tag)
			if err := sbcast(ctx, s.bins[i], part); err != nil {
				return fmt.Errorf("slurm: %v, to %s on %s (%s): set [ship] cache in the hosts file to a folder with room for it on every node",
					err, part, fewNames(nodes), s.lacking([]int{i}, c.have, nodes))
			}
		}
		sent := make([]bincache.Binary, len(send))
		for j, i := range send {
			sent[j] = s.bins[i]
		}
		rs, err := sh.shipStep(ctx, len(nodes), bincache.SettleArgv(c.dir, tag, sent))
		if err != nil {
			return fmt.Errorf("slurm: settle the binaries sent by sbcast: %w", err)
		}
		ok := make([]map[string]bool, len(send))
		for j := range ok {
			ok[j] = map[string]bool{}
		}
		var refused []string
		again := map[int]bool{}
		for _, r := range rs {
			if r.Word == "unsafe" && r.Index < 0 {
				return fmt.Errorf("slurm: %w", s.unsafeCache(r.Host, r.Rest))
			}
			if r.Index < 0 || r.Index >= len(send) {
				continue
			}
			i := send[r.Index]
			if r.Word == "ok" {
				ok[r.Index][r.Host] = true
				at[i] = r.Rest
				continue
			}
			then := sendingAgain
			if attempt == 2 {
				then = ""
			}
			refused = append(refused, r.Host+": "+s.refused(r.Host, i, r, then))
			again[i] = true
		}
		for j, i := range send {
			if len(ok[j]) < len(nodes) && !again[i] {
				refused = append(refused, fmt.Sprintf("%d of %d nodes answered for %s", len(ok[j]), len(nodes), s.named(i)))
				again[i] = true
			}
			for _, n := range nodes {
				if !again[i] {
					s.sent(i, n)
				}
			}
		}
		if len(refused) > 0 && attempt == 2 {
			return fmt.Errorf("slurm: sent twice by sbcast, refused twice: %s", strings.Join(refused, "; "))
		}
		send = slices.DeleteFunc(send, func(i int) bool { return !again[i] })
	}
	s.at = [][]string{at}
	s.report("sbcast", time.Since(start))
	return nil
}

// nodesCheck is what the nodes' check answered.
type nodesCheck struct {
	dir       string              // the cache dir, the same on every node
	have      []map[string]string // per binary, node: its cached copy (have, copied)
	refused   []bincache.Reply    // cached copies refused (bad, unsafe)
	untrusted map[int][]string    // per binary, "node: why" its path there is not taken
}

// readCheck reads the nodes' answers to the check. A node that cannot
// check, a cache another user could write to, a copy that failed, and
// caches at different paths are errors.
func (s *shipment) readCheck(rs []bincache.Reply, nodes []string) (nodesCheck, error) {
	c := nodesCheck{have: make([]map[string]string, len(s.bins)), untrusted: map[int][]string{}}
	for i := range c.have {
		c.have[i] = map[string]string{}
	}
	dirs := map[string][]string{} // cache dir: nodes
	for _, r := range rs {
		switch {
		case r.Word == "notool":
			return c, fmt.Errorf("slurm: %s: cannot check the binaries sent to it: %s", r.Host, r.Rest)
		case r.Word == "unsafe" && r.Index < 0:
			return c, fmt.Errorf("slurm: %w", s.unsafeCache(r.Host, r.Rest))
		case r.Word == "dir":
			dirs[r.Rest] = append(dirs[r.Rest], r.Host)
		case r.Index < 0 || r.Index >= len(s.bins):
		case r.Word == "have" || r.Word == "copied":
			c.have[r.Index][r.Host] = r.Rest
		case r.Word == "bad" || r.Word == "unsafe":
			c.refused = append(c.refused, r)
		case r.Word == "untrusted":
			c.untrusted[r.Index] = append(c.untrusted[r.Index], r.Host+": "+r.Rest)
		case r.Word == "fail":
			return c, fmt.Errorf("slurm: %s: %s", r.Host, s.why(r.Index, r))
		}
	}
	if len(dirs) != 1 {
		var at []string
		for _, d := range slices.Sorted(maps.Keys(dirs)) {
			slices.Sort(dirs[d])
			at = append(at, d+" on "+fewNames(dirs[d]))
		}
		return c, fmt.Errorf("slurm: the nodes' binary caches are not at one path (%s; %d nodes), and the agents' step runs one command line on all of them: "+
			"set [ship] cache in the hosts file to a folder at the same path on every node", strings.Join(at, "; "), len(nodes))
	}
	c.dir = slices.Sorted(maps.Keys(dirs))[0]
	return c, nil
}

// lacking says which nodes lack which of bins send (have: the nodes that
// have each).
func (s *shipment) lacking(send []int, have []map[string]string, nodes []string) string {
	var parts []string
	for _, i := range send {
		var lack []string
		for _, n := range nodes {
			if _, ok := have[i][n]; !ok {
				lack = append(lack, n)
			}
		}
		parts = append(parts, fmt.Sprintf("%s lack %s", fewNames(lack), s.named(i)))
	}
	return strings.Join(parts, ", ")
}

// stepFailed is an srun step of shipping that failed: how, and what srun
// said.
type stepFailed struct {
	err  error
	said []byte
}

func (e *stepFailed) Error() string {
	return fmt.Sprintf("srun %s: %s", describeErr(e.err), tailOf(e.said, 3))
}

// launchFailed is the error of a job whose first step, shipping's check,
// Slurm could not launch on a node (down, cut off): the message the
// agents' step would have given, read the same way (stepCause), with
// what srun said below, that node's lines first; nil for other failures.
func launchFailed(err error, nodes []string) error {
	var sf *stepFailed
	if !errors.As(err, &sf) {
		return nil
	}
	lines := strings.Split(strings.TrimSpace(string(sf.said)), "\n")
	c, ok := firstCause(lines, causeContext{hosts: nodes}.readSrun)
	if !ok || c.rank != causeLaunch || c.host == "" {
		return nil
	}
	lines = hostFirst(lines, c.host)
	e := agentEnd{what: "srun step (the check of the nodes' binaries)", err: sf.err, cause: c.String(), lines: lines[:min(len(lines), maxShownLines)]}
	return fmt.Errorf("%s%s", e, e.said())
}

// sbcast sends b to every node of the allocation as dest.
func sbcast(ctx context.Context, b bincache.Binary, dest string) error {
	cmd := exec.Command("sbcast", "--force", b.Path, dest)
	cmd.Env = jobenv.Clean(os.Environ())
	_, errOut, err := runTool(ctx, cmd, shipTimeout)
	if err != nil {
		return fmt.Errorf("sbcast %s failed (%s: %s)", b.Name, describeErr(err), tailOf(errOut, 3))
	}
	return nil
}

// shipStep runs a bincache script on the first n nodes of the
// allocation, one task each, and returns their answers.
func (sh slurmHosts) shipStep(ctx context.Context, n int, argv []string) ([]bincache.Reply, error) {
	args := []string{"--overlap", "--nodes=" + strconv.Itoa(n), "--ntasks=" + strconv.Itoa(n), "--ntasks-per-node=1",
		immediate(sh.cfg), "--export=ALL"}
	limit := shipCheckTimeout
	if sh.cfg != nil {
		args = append(args, sh.cfg.SrunArgs...)
		limit += sh.cfg.Immediate
	}
	cmd := exec.Command("srun", append(args, argv...)...)
	cmd.Env = jobenv.Clean(os.Environ())
	out, errOut, err := runTool(ctx, cmd, limit)
	if err != nil {
		return nil, &stepFailed{err, errOut}
	}
	return replies(out), nil
}
