package launch

import (
	"context"
	"errors"
	"fmt"
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
// same path: the cached copy once any node lacked it.
//
// Without sbcast in PATH, or when sbcast fails, the binaries run from
// their paths, as the nodes see them (a shared filesystem), with one
// warning; if the nodes do not have them there, the agents' step says so.

// ship makes the nodes of this allocation have s.bins, and records in
// s.at (one row: all nodes alike) the path each runs from.
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
		s.say("could not check the binary cache of the nodes (%v): %s", err, s.fallback(nil))
		return nil
	}
	// What every node has of each binary.
	dirs := map[string]bool{}
	have := make([]map[string]string, len(s.bins)) // node: entry
	inplace := make([]int, len(s.bins))
	var bad []bincache.Reply // cached copies refused
	for i := range have {
		have[i] = map[string]string{}
	}
	for _, r := range rs {
		switch {
		case r.Word == "nosum":
			return fmt.Errorf("slurm: %s: cannot check the binaries sent to it: %s", r.Host, r.Rest)
		case r.Word == "dir":
			dirs[r.Rest] = true
		case r.Index < 0 || r.Index >= len(s.bins):
		case r.Word == "have":
			have[r.Index][r.Host] = r.Rest
		case r.Word == "inplace":
			inplace[r.Index]++
		case r.Word == "bad":
			bad = append(bad, r)
		case r.Word == "fail":
			return fmt.Errorf("slurm: %s: %s", r.Host, s.why(r.Index, r))
		}
	}
	at := slices.Clone(s.paths)
	var send []int
	for i := range s.bins {
		switch {
		case len(have[i]) == len(nodes):
			for _, e := range have[i] {
				at[i] = e // the same on every node: one dir
			}
		case inplace[i] == len(nodes):
		default:
			send = append(send, i)
		}
	}
	for _, r := range bad {
		then := runningThere
		if slices.Contains(send, r.Index) {
			then = sendingAgain
		}
		s.refused(r.Host, r.Index, r, then)
	}
	s.at = [][]string{at}
	if len(send) == 0 {
		return nil
	}
	if len(dirs) != 1 {
		s.say("the nodes' binary caches are not at one path (%s): %s", strings.Join(keys(dirs), ", "), s.fallback(send))
		return nil
	}
	dir := keys(dirs)[0]
	if _, err := exec.LookPath("sbcast"); err != nil {
		s.say("sbcast is not in PATH: %s", s.fallback(send))
		return nil
	}
	if err := sh.makeEntries(ctx, s, send, inplace, len(nodes)); err != nil {
		return err
	}
	tag := os.Getenv("SLURM_JOB_ID") + "-" + strconv.Itoa(os.Getpid())
	for attempt := 1; len(send) > 0; attempt++ {
		for _, i := range send {
			if err := sbcast(ctx, s.bins[i], bincache.Part(dir, s.bins[i], tag)); err != nil {
				s.say("%v: %s", err, s.fallback(send))
				return nil
			}
		}
		sent := make([]bincache.Binary, len(send))
		for j, i := range send {
			sent[j] = s.bins[i]
		}
		rs, err := sh.shipStep(ctx, len(nodes), bincache.SettleArgv(dir, tag, sent))
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

// makeEntries makes the entry directories sbcast writes into on the nodes
// that did not need one: those that run a binary from its path, while
// others lack it (the check makes them only where a binary is needed).
func (sh slurmHosts) makeEntries(ctx context.Context, s *shipment, send, inplace []int, nodes int) error {
	var bins []bincache.Binary
	var paths []string
	for _, i := range send {
		if inplace[i] > 0 {
			bins, paths = append(bins, s.bins[i]), append(paths, s.paths[i])
		}
	}
	if len(bins) == 0 {
		return nil
	}
	rs, err := sh.shipStep(ctx, nodes, bincache.CheckArgv(s.cache, bincache.ModeAlways, bins, paths))
	if err != nil {
		return fmt.Errorf("slurm: make the binary cache of the nodes: %w", err)
	}
	for _, r := range rs {
		if r.Word == "fail" && r.Index >= 0 && r.Index < len(bins) {
			return fmt.Errorf("slurm: %s: could not make the cache entry of %s: %s", r.Host, bins[r.Index].Name, r.Rest)
		}
	}
	return nil
}

// fallback says that the binaries send (nil: all) run from their paths,
// and resets them to run so.
func (s *shipment) fallback(send []int) string {
	if send == nil {
		for i := range s.bins {
			send = append(send, i)
		}
	}
	var names []string
	for _, i := range send {
		names = append(names, s.paths[i])
		if len(s.at) > 0 {
			s.at[0][i] = s.paths[i]
		}
	}
	return "running " + strings.Join(names, ", ") + " from the path the nodes see (not sent)"
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

func keys(m map[string]bool) []string {
	k := make([]string, 0, len(m))
	for s := range m {
		k = append(k, s)
	}
	slices.Sort(k)
	return k
}
