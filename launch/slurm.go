package launch

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/monarch-go/monarch/hostsconfig"
	"github.com/monarch-go/monarch/internal/child"
	"github.com/monarch-go/monarch/internal/procstat"
)

// The Slurm scheduler. Inside an allocation (SLURM_JOB_ID set) the agents
// run as one srun step with one task per node; outside, `monarch run`
// re-runs itself under salloc with the job's resources, or submits itself
// with sbatch (--detach). Slurm's own errors (a bad partition, an
// impossible request) come back within seconds: requests carry
// --immediate, and the test cluster sets EnforcePartLimits. Its queue
// (squeue, scancel) is what status and stop ask about submitted jobs.

func init() {
	register(kind{name: hostsconfig.SchedulerSlurm, title: "Slurm", queue: slurmQueue{},
		open: func(h *hostsconfig.Hosts) scheduler { return slurmScheduler{h.Slurm} }})
}

type slurmScheduler struct{ cfg *hostsconfig.Slurm }

// prepare: inside an allocation, its nodes; outside one, the job runs
// under salloc (elsewhere).
func (s slurmScheduler) prepare(ctx context.Context) (*placement, error) {
	p := &placement{remote: true}
	if s.cfg != nil {
		p.monarch = s.cfg.Monarch
	}
	if (slurmQueue{}).current() == "" {
		p.elsewhere = s.allocate
		return p, nil
	}
	nodes, err := allocationNodes()
	if err != nil {
		return nil, fmt.Errorf("launch: %w", err)
	}
	p.hosts = nodes
	p.route = func(ctx context.Context) string { return nodeAddr(ctx, nodes[0]) }
	p.jobEnd = jobEnd(ctx, (slurmQueue{}).current())
	return p, nil
}

// jobEnd asks Slurm when job id ends (its time limit); zero when it has
// none or Slurm does not say.
func jobEnd(ctx context.Context, id string) time.Time {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "squeue", "-h", "-j", id, "-o", "%e").Output()
	if err != nil {
		return time.Time{}
	}
	end, err := time.ParseInLocation("2006-01-02T15:04:05", strings.TrimSpace(string(out)), time.Local)
	if err != nil {
		return time.Time{} // "N/A", "Unknown": no limit
	}
	return end
}

// start starts the agents as one srun step over every node of the
// allocation, the secret in the step's environment, never in argv.
func (s slurmScheduler) start(ctx context.Context, p *placement, spec *agentSpec) (*agents, error) {
	a := newAgents(1)
	if err := a.start("srun step", agentIDs(len(p.hosts)), s.step(spec, len(p.hosts)), spec.stderr); err != nil {
		return nil, fmt.Errorf("slurm: %w", err)
	}
	return a, nil
}

// step is the srun command of the agents of n nodes: each finds its
// index in the job's node list (--slurm).
func (s slurmScheduler) step(spec *agentSpec, n int) *exec.Cmd {
	args := []string{"--overlap", "--nodes=" + strconv.Itoa(n), "--ntasks=" + strconv.Itoa(n),
		"--ntasks-per-node=1", "--kill-on-bad-exit=1", immediate(s.cfg), "--export=ALL"}
	if s.cfg != nil {
		args = append(args, s.cfg.SrunArgs...)
	}
	agent := spec.args
	agent.Slurm = true
	cmd := exec.Command("srun", append(args, agent.Argv(spec.monarch)...)...)
	cmd.Env = childEnv(spec.env)
	cmd.Stdout = os.Stdout
	return cmd
}

// allocate runs `salloc <resources> monarch run JOB` and returns its status:
// the inner monarch run does the work inside the allocation.
func (s slurmScheduler) allocate(ctx context.Context, cfg *RunConfig) (int, error) {
	args, err := allocArgs(s.cfg)
	if err != nil {
		return 0, err
	}
	rerun := cfg.Rerun
	if len(rerun) == 0 {
		rerun = []string{"run", cfg.JobPath}
	}
	args = append(append(args, immediate(s.cfg), "--job-name="+cfg.jobName(), cfg.Monarch), rerun...)
	cmd := exec.Command("salloc", args...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, cfg.Stdout, cfg.Stderr
	p, err := child.Start(cmd)
	if err != nil {
		return 0, fmt.Errorf("slurm: salloc: %w", err)
	}
	// salloc ends the allocation on SIGTERM and passes nothing on: the
	// signals go to the monarch run it runs.
	relay := func(sig os.Signal) {
		kids := procstat.Children(p.Pid())
		if len(kids) == 0 {
			p.Signal(sig)
		}
		for _, k := range kids {
			syscall.Kill(k, sig.(syscall.Signal))
		}
	}
	code, _, _ := superviseClient(ctx, p, stopTimes{grace: cfg.Grace + 5*time.Second, stop: cfg.Job.StopGrace, relay: relay}, nil, nil)
	return code, nil
}

// allocationNodes lists the nodes of the current allocation.
func allocationNodes() ([]string, error) {
	list := os.Getenv("SLURM_JOB_NODELIST")
	if list == "" {
		list = os.Getenv("SLURM_NODELIST")
	}
	if list == "" {
		return nil, fmt.Errorf("inside Slurm job %s but SLURM_JOB_NODELIST is not set", os.Getenv("SLURM_JOB_ID"))
	}
	nodes, err := ExpandHostlist(list)
	if err != nil {
		return nil, fmt.Errorf("SLURM_JOB_NODELIST %q: %w", list, err)
	}
	return nodes, nil
}

// allocArgs are the resource options of salloc and sbatch.
func allocArgs(s *hostsconfig.Slurm) ([]string, error) {
	if s == nil || s.Nodes < 1 {
		return nil, fmt.Errorf("slurm: outside an allocation the hosts file must give [slurm] nodes")
	}
	args := []string{"--nodes=" + strconv.Itoa(s.Nodes), "--ntasks-per-node=1"}
	if s.Partition != "" {
		args = append(args, "--partition="+s.Partition)
	}
	if s.Time != "" {
		args = append(args, "--time="+s.Time)
	}
	if s.Account != "" {
		args = append(args, "--account="+s.Account)
	}
	if s.GPUsPerNode > 0 {
		args = append(args, "--gpus-per-node="+strconv.Itoa(s.GPUsPerNode))
	}
	return append(args, s.SbatchArgs...), nil
}

func immediate(s *hostsconfig.Slurm) string {
	d := hostsconfig.DefaultSlurmImmediate
	if s != nil && s.Immediate > 0 {
		d = s.Immediate
	}
	return "--immediate=" + strconv.Itoa(int((d+time.Second-1)/time.Second))
}

// nodeAddr asks Slurm for a node's address (NodeAddr), which may differ
// from its name.
func nodeAddr(ctx context.Context, node string) string {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "scontrol", "show", "node", "-o", node).Output()
	if err != nil {
		return node
	}
	for _, f := range strings.Fields(string(out)) {
		if a, ok := strings.CutPrefix(f, "NodeAddr="); ok && a != "" {
			return a
		}
	}
	return node
}
