package spmd

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/monarch-go/monarch/actorrt"
)

// Job is what Run runs.
type Job struct {
	// Command is run on every proc.
	Command []string
	// GPUsDim is the dimension of the procs whose index is a proc's
	// CUDA_VISIBLE_DEVICES; "" for "gpus".
	GPUsDim string
	// NoticeSignal is sent to every rank that catches it when the job is
	// about to end (see the package doc); 0 sends none.
	NoticeSignal syscall.Signal
	// Stderr receives Run's own lines (default os.Stderr).
	Stderr io.Writer
	// MaxRestarts is how many times, at most, every rank is started
	// again when one fails or a host is lost (torchrun's --max-restarts);
	// 0: never.
	MaxRestarts int
	// MinHosts and MaxHosts are torchrun's --nnodes MIN:MAX (a job's
	// [spmd] nnodes, monarch local --nnodes): the ranks run on at most
	// MaxHosts of the job's hosts and, when hosts are lost, start again
	// on those left, down to MinHosts (see "Elastic hosts" in the package
	// doc). 0: every host of the job (MaxHosts), MaxHosts (MinHosts).
	MinHosts, MaxHosts int
	// OnRestart, if set, is told of each restart before the ranks start
	// again (the job's client reports it to its launcher).
	OnRestart func(Restart)
}

// Restart is one gang restart: the attempt that begins (1 for the first
// restart) and the failure that ended the one before it.
type Restart struct {
	Restart     int    `json:"restart"`
	MaxRestarts int    `json:"max_restarts"`
	Summary     string `json:"summary"` // "rank 1 on h0 exited with status 1", "host h1 lost (ranks 2, 3 ended); going on with 1 of 2 hosts"
}

// MeshName is the name of the procs' mesh: what their failure report
// and `monarch logs --mesh` call them.
const MeshName = "spmd"

// defaultProcs is one proc per host, as torchrun's --nproc-per-node.
var defaultProcs = actorrt.Dims{{"procs", 1}}

// Run runs j on the job's procs and waits for them (see the package
// doc). ctx's end stops them.
func Run(ctx context.Context, j Job) error {
	if len(j.Command) == 0 || j.Command[0] == "" {
		return errors.New("spmd: no command")
	}
	if j.MaxRestarts < 0 {
		return fmt.Errorf("spmd: max restarts %d: want 0 or more", j.MaxRestarts)
	}
	if j.Stderr == nil {
		j.Stderr = os.Stderr
	}
	hosts, err := actorrt.HostsFromConfig(ctx, "MONARCH_HOSTS")
	if errors.Is(err, actorrt.ErrNoHostsConfig) {
		hosts, err = actorrt.ThisHost(ctx), nil
	}
	if err != nil {
		return err
	}
	nodes, err := j.nodes(hosts.Extent().NumRanks())
	if err != nil {
		return err
	}
	gang := hosts
	if nodes.max < hosts.Extent().NumRanks() {
		gang = hosts.Slice("hosts", 0, nodes.max) // the others wait, to take a lost host's place
	}
	// Notices are heard from before the procs start: a warning that
	// comes meanwhile is passed on once they run.
	notices := actorrt.Preempted(ctx)
	opts := []actorrt.ProcOption{actorrt.WithCommand(j.Command...), actorrt.WithName(MeshName)}
	if j.GPUsDim != "" {
		opts = append(opts, actorrt.WithGPUsDim(j.GPUsDim))
	}
	dims := actorrt.JobProcs(ctx, defaultProcs)
	for attempt := 0; ; attempt++ {
		// Each attempt is a new mesh: rank 0's agent gives it a
		// MASTER_PORT it never handed out before, a new rendezvous.
		env := []string{"TORCHELASTIC_RESTART_COUNT=" + strconv.Itoa(attempt), "TORCHELASTIC_MAX_RESTARTS=" + strconv.Itoa(j.MaxRestarts),
			"GROUP_WORLD_SIZE=" + strconv.Itoa(gang.Extent().NumRanks())}
		procs, err := gang.SpawnProcs(ctx, dims, append(slices.Clip(opts), actorrt.WithProcEnv(func(actorrt.Point) []string { return env }))...)
		if err != nil {
			return err
		}
		r := &run{job: j, nodes: nodes, hosts: hosts, gang: gang, procs: procs, ends: procs.Ends(), left: procs.Extent().NumRanks(), attempt: attempt}
		err = r.wait(ctx, notices)
		if !errors.Is(err, errRestart) {
			return err
		}
		gang = r.next
	}
}

// nnodes is the job's MIN:MAX hosts, resolved.
type nnodes struct{ min, max int }

func (n nnodes) String() string { return fmt.Sprintf("%d:%d", n.min, n.max) }

// nodes resolves the job's MinHosts:MaxHosts for a job of n hosts.
func (j Job) nodes(n int) (nnodes, error) {
	nodes := nnodes{max: cmp.Or(j.MaxHosts, n)}
	nodes.min = cmp.Or(j.MinHosts, nodes.max)
	switch {
	case j.MinHosts < 0 || j.MaxHosts < 0 || nodes.min > nodes.max:
		return nodes, fmt.Errorf("spmd: nnodes %d:%d: want 1 <= MIN <= MAX", j.MinHosts, j.MaxHosts)
	case nodes.max > n:
		return nodes, fmt.Errorf("spmd: nnodes %v: the job has %s, fewer than MAX", nodes, plural(n, "host"))
	}
	return nodes, nil
}

// run is one Run's procs as they end.
type run struct {
	job   Job
	nodes nnodes
	// hosts are the job's; gang those this attempt runs on; next those
	// the next attempt runs on, once wait returned errRestart.
	hosts, gang, next *actorrt.HostMesh
	procs             *actorrt.ProcMesh
	ends              <-chan actorrt.ProcEnd
	left              int // ranks still running
	// attempt counts the restarts before this run: 0 for the first.
	attempt int
	// failures are the failed ends heard, in the order heard.
	failures []actorrt.ProcEnd
}

// errRestart is what wait returns when a rank failed and every rank is
// to start again.
var errRestart = errors.New("spmd: restart")

// wait waits for every rank to end, passing on the warnings; the first
// failure, or ctx's end, stops the others.
func (r *run) wait(ctx context.Context, notices <-chan actorrt.PreemptNotice) error {
	for r.left > 0 {
		select {
		case e := <-r.ends:
			if r.heard(e) {
				return r.failed(ctx)
			}
		case n := <-notices:
			if !n.Stop {
				r.notify(ctx, n) // a stop comes as ctx's end too
			}
		case <-ctx.Done():
			return r.stop(ctx)
		}
	}
	return nil
}

// notify sends the notice signal to every rank that catches it, and
// says so on stderr; it returns how many got it.
func (r *run) notify(ctx context.Context, n actorrt.PreemptNotice) int {
	if r.job.NoticeSignal == 0 {
		return 0
	}
	sent, err := r.procs.Notify(context.WithoutCancel(ctx), r.job.NoticeSignal)
	if err != nil {
		fmt.Fprintf(r.job.Stderr, "monarch: job ending, %s: cannot send %s to the ranks: %v\n", n.Reason, signalName(r.job.NoticeSignal), err)
		return sent
	}
	fmt.Fprintf(r.job.Stderr, "monarch: job ending, %s: %s sent to %d of %d ranks (those that catch it)\n", n.Reason, signalName(r.job.NoticeSignal), sent, r.procs.Extent().NumRanks())
	return sent
}

// stopGrace is how long a stop gives the commands when the notice does
// not say (no stop grace from the job).
const stopGrace = 5 * time.Second

// stop stops the ranks when ctx ends. On a stop of the job (SIGTERM to
// it: monarch stop, a preemption; ctx's cause is the notice) the ranks
// that catch the notice signal get it first, and have half the stop
// grace to checkpoint (or end); then every rank gets SIGTERM and what is
// left of the grace, as under torchrun; then SIGKILL. Otherwise (Ctrl-C)
// SIGTERM at once.
func (r *run) stop(ctx context.Context) error {
	cause := context.Cause(ctx)
	deadline := time.Now().Add(stopGrace)
	var n *actorrt.PreemptNotice
	if errors.As(cause, &n) && !n.Deadline.IsZero() {
		deadline = n.Deadline
	}
	if n != nil && r.notify(ctx, *n) > 0 {
		r.waitEnds(context.WithoutCancel(ctx), time.Now().Add(time.Until(deadline)/2))
	}
	r.procs.Stop(context.WithoutCancel(ctx), actorrt.WithGrace(time.Until(deadline)))
	return cause
}

// waitEnds waits until every rank has ended, until is past, or ctx
// ends.
func (r *run) waitEnds(ctx context.Context, until time.Time) {
	timer := time.NewTimer(time.Until(until))
	defer timer.Stop()
	for r.left > 0 {
		select {
		case e := <-r.ends:
			r.heard(e)
		case <-timer.C:
			return
		case <-ctx.Done():
			return
		}
	}
}

// heard counts e out of the ranks running and keeps it if it is a
// failure (a status not 0), which it reports. The ends of the ranks
// stopped after a failure are kept too, placed at their ends (see
// failedAt): they happened after the stop, itself after the failure heard
// first, so firstFailure never prefers them.
func (r *run) heard(e actorrt.ProcEnd) bool {
	r.left--
	if e.Status == 0 {
		return false
	}
	r.failures = append(r.failures, e)
	return true
}

// endsWindow bounds how long, once the ranks were stopped, the ends not
// heard yet are waited for, to tell which failure came first. Stop
// returns once every rank ended: their notices are on their way.
const endsWindow = time.Second

// silentWait bounds how long the ranks a stop did not end (their agent
// silent) are waited for: their host's loss ends them at the job's
// [health] lost_after (30 s by default), which this outlasts.
const silentWait = 5 * time.Minute

// failed stops the other ranks after the first failure heard, then says
// which failed first (firstFailure: of those heard by then, the one that
// happened first), last (after the others' last lines), and returns it
// as the job's failure with its status.
func (r *run) failed(ctx context.Context) error {
	bg := context.WithoutCancel(ctx)
	others, before := r.left, len(r.failures)
	r.procs.Stop(bg) // their last lines are printed before it returns
	r.waitEnds(bg, time.Now().Add(endsWindow))
	if r.left > 0 {
		// Ranks whose agents did not answer the stop: their host is
		// silent, and lost once its silence passes the job's
		// lost_after, when their ends come. Wait for them: a failure
		// heard first may be a peer's of a host being lost.
		r.waitEnds(ctx, time.Now().Add(silentWait))
	}
	if _, lost := r.gang.Up(); len(lost) > 0 {
		return r.hostsLost(ctx, lost, others, before)
	}
	e := firstFailure(r.failures)
	f, how := failureOf(e, r.procs.StderrTail(bg, e.Point))
	r.next = r.gang
	if r.attempt < r.job.MaxRestarts && ctx.Err() == nil {
		// A restart: every rank starts again, a new rendezvous.
		n := r.procs.Extent().NumRanks()
		fmt.Fprintf(r.job.Stderr, "monarch: rank %d on %s failed: %s (%v); restarting all %d ranks (restart %d of %d)\n",
			f.Rank, f.Host, how, e.Point, n, r.attempt+1, r.job.MaxRestarts)
		if r.job.OnRestart != nil {
			r.job.OnRestart(Restart{Restart: r.attempt + 1, MaxRestarts: r.job.MaxRestarts, Summary: f.Summary})
		}
		return errRestart
	}
	fmt.Fprintf(r.job.Stderr, "monarch: rank %d on %s failed: %s (%v)%s\n", f.Rank, f.Host, how, e.Point, r.stoppedText(others))
	return exitError(e.Status, f)
}

// stoppedText ends the line of the job's failure: "; the other 3 ranks
// were stopped (after 2 restarts)".
func (r *run) stoppedText(others int) string {
	stopped := ""
	switch others {
	case 0:
	case 1:
		stopped = "; the other rank was stopped"
	default:
		stopped = fmt.Sprintf("; the other %d ranks were stopped", others)
	}
	if r.attempt > 0 {
		stopped += fmt.Sprintf(" (after %s)", restartsText(r.attempt))
	}
	return stopped
}

// exitError is the job's failure f with status as its exit code, 1 when
// the status is none (a host lost) or no exit code.
func exitError(status int, f *actorrt.Failure) error {
	if status < 0 || status > 255 {
		status = 1
	}
	return &actorrt.ExitError{Code: status, Failure: f}
}

// hostsLost ends an attempt that lost hosts (named lost) once its ranks
// were stopped (others of them running then, the ends heard before the
// failures' first before): the gang starts again on the job's hosts
// still up, at most MAX of them, if that is MIN or more and a restart is
// left; otherwise the job fails, saying which.
func (r *run) hostsLost(ctx context.Context, lost []string, others, before int) error {
	// The ranks lost with their hosts: their ends are the agents'
	// notices, status -1. Those heard after the stop were not stopped.
	var ranks []int
	var first *actorrt.ProcEnd
	for i, e := range r.failures {
		if e.Status == -1 && slices.Contains(lost, e.Host) {
			ranks = append(ranks, e.Point.Rank())
			if i >= before {
				others--
			}
			if first == nil || e.Point.Rank() < first.Point.Rank() {
				first = &r.failures[i]
			}
		}
	}
	slices.Sort(ranks)
	what := fmt.Sprintf("%s %s lost", noun(len(lost), "host"), strings.Join(lost, ", "))
	if len(ranks) > 0 {
		what += fmt.Sprintf(" (%s %s ended)", noun(len(ranks), "rank"), strings.ReplaceAll(strings.Trim(fmt.Sprint(ranks), "[]"), " ", ", "))
	}
	f := &actorrt.Failure{Summary: what, Mesh: MeshName, Rank: -1, Exit: -1}
	if first != nil {
		f, _ = failureOf(*first, nil)
		f.Summary = what
	}
	up, _ := r.hosts.Up()
	n := min(up.Extent().NumRanks(), r.nodes.max)
	if up.Err() != nil {
		n = 0
	}
	var why string
	switch {
	case n < r.nodes.min:
		why = fmt.Sprintf("%s left, fewer than MIN (nnodes %v)", plural(n, "host"), r.nodes)
	case ctx.Err() != nil:
		why = "the job was stopping"
	case r.attempt >= r.job.MaxRestarts:
		why = fmt.Sprintf("going on with %d of %d hosts needs a restart, and none is left (max_restarts %d)", n, r.nodes.max, r.job.MaxRestarts)
	default:
		r.next = up
		if n < up.Extent().NumRanks() {
			r.next = up.Slice("hosts", 0, n)
		}
		ranks := n * r.procs.Extent().NumRanks() / r.gang.Extent().NumRanks()
		fmt.Fprintf(r.job.Stderr, "monarch: %s; going on with %d of %d hosts (min %d): restarting %s (restart %d of %d)\n",
			what, n, r.nodes.max, r.nodes.min, plural(ranks, "rank"), r.attempt+1, r.job.MaxRestarts)
		if r.job.OnRestart != nil {
			r.job.OnRestart(Restart{Restart: r.attempt + 1, MaxRestarts: r.job.MaxRestarts,
				Summary: fmt.Sprintf("%s; going on with %d of %d hosts", what, n, r.nodes.max)})
		}
		return errRestart
	}
	fmt.Fprintf(r.job.Stderr, "monarch: %s: %s%s\n", what, why, r.stoppedText(others))
	return exitError(-1, f)
}

// restartsText is "1 restart", "2 restarts".
func restartsText(n int) string { return plural(n, "restart") }

// plural is "1 host", "2 hosts".
func plural(n int, what string) string { return strconv.Itoa(n) + " " + noun(n, what) }

// noun is what, in the plural unless n is 1.
func noun(n int, what string) string {
	if n == 1 {
		return what
	}
	return what + "s"
}
