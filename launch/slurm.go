package launch

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/monarch-go/monarch/hostsconfig"
	"github.com/monarch-go/monarch/internal/jobenv"
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
		open: func(h *hostsconfig.Hosts) scheduler { return slurmHosts{slurmScheduler{h.Slurm}, h.Path} }})
}

// slurmScheduler is the [slurm] table's settings.
type slurmScheduler struct{ cfg *hostsconfig.Slurm }

// slurmHosts is the Slurm scheduler of a hosts file: its settings, and
// the file, for messages that name its keys.
type slurmHosts struct {
	slurmScheduler
	file string
}

// prepare: inside an allocation, its nodes (the first [slurm] nodes of
// them, when it gives fewer); outside one, the job runs under salloc
// (elsewhere), unless sinfo says the partition can never give what the
// hosts file asks.
func (s slurmHosts) prepare(ctx context.Context) (*placement, error) {
	p := &placement{remote: true}
	if s.cfg != nil {
		p.monarch = s.cfg.Monarch
	}
	if (slurmQueue{}).current() == "" {
		parts, _ := sinfoPartitions(ctx) // none: Slurm will say, and allocFailed asks again
		if err := s.fits(parts); err != nil {
			return nil, err
		}
		p.elsewhere = func(ctx context.Context, cfg *RunConfig) (int, error) { return s.allocate(ctx, cfg, parts) }
		return p, nil
	}
	nodes, err := s.allocationHosts()
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

// allocationHosts are the nodes of the allocation this process runs in
// that the job uses: all of them, or the first [slurm] nodes. A hosts
// file that asks for more than the allocation has is an error: the job
// would run on fewer hosts than it was written for.
func (s slurmHosts) allocationHosts() ([]string, error) {
	nodes, err := allocationNodes()
	if err != nil || s.nodes() == 0 || s.nodes() == len(nodes) {
		return nodes, err
	}
	if s.nodes() > len(nodes) {
		return nil, fmt.Errorf("slurm: %s, but this allocation (Slurm job %s) has %d node%s: %s",
			s.keyIs("nodes", s.nodes()), (slurmQueue{}).current(), len(nodes), plural(len(nodes)), allocationList())
	}
	return nodes[:s.nodes()], nil
}

// allocationList is the allocation's node list as Slurm gives it.
func allocationList() string {
	if l := os.Getenv("SLURM_JOB_NODELIST"); l != "" {
		return l
	}
	return os.Getenv("SLURM_NODELIST")
}

// start starts the agents as one srun step over the job's nodes of the
// allocation: with TLS, without the secret, which each agent gets over
// its TLS link once MUNGE proves it runs as this user (mungeToken);
// without, the secret in the step's environment, never in argv. What
// srun and slurmstepd say goes to the job's system log (see stepLog),
// and into the message if the step fails.
func (s slurmHosts) start(ctx context.Context, p *placement, spec *agentSpec) (*agents, error) {
	all, _ := allocationNodes()
	subset := len(all) > len(p.hosts)
	if subset {
		fmt.Fprintf(spec.stderr, "monarch: %s: the job runs on %s, the first %d of the %d nodes of this allocation (Slurm job %s: %s)\n",
			s.keyIs("nodes", s.nodes()), fewNames(p.hosts), len(p.hosts), len(all), (slurmQueue{}).current(), allocationList())
	}
	spec.env.Bus.HubHosts = hubHosts(p.hosts, spec.env.Bus.Hubs)
	if err := mungeToken(ctx, &spec.env); err != nil {
		return nil, err
	}
	if err := s.ship(ctx, spec.ship); err != nil {
		return nil, err
	}
	spec.ship.use(0, &spec.monarch, &spec.args.Program) // the copies sent, if any
	a := newAgents(len(p.hosts) + 1)                    // a task's end each, and the step's
	log := a.stepLog(spec.args.Job, "srun", srunOwn, spec.stderr)
	why := causeContext{hosts: p.hosts, monarch: spec.monarch, key: "[slurm] monarch", keySet: s.cfg != nil && s.cfg.Monarch != ""}
	step := s.step(spec, len(p.hosts))
	if subset {
		// The step's nodes start at the allocation's first: those the
		// agents' indexes (cmd_agent's slurmIndex) count from.
		step.Args = slices.Insert(step.Args, 1, "--relative=0")
	}
	if err := a.startTasks(p.hosts, step, log, why.readSrun); err != nil {
		a.stop(0)
		return nil, fmt.Errorf("slurm: %w", err)
	}
	return a, nil
}

// mungeToken takes the token out of the agents' environment when the bus
// runs TLS, and has them prove themselves with the munged Slurm uses. A
// step's environment rides Slurm's RPCs to the nodes, which MUNGE signs
// but does not encrypt: the token would cross the network in the clear.
func mungeToken(ctx context.Context, env *jobenv.Env) error {
	if env.Bus.TLSCA == "" && env.Bus.TLSName == "" {
		return nil // tls = false: said to be unsafe off-host
	}
	socket, err := slurmMungeSocket(ctx)
	if err != nil {
		return fmt.Errorf("slurm: the agents get the bus token over TLS once MUNGE proves they run as you: %w", err)
	}
	if socket == "" {
		socket = "-"
	}
	env.Bus.Token, env.LinkMunge = "", socket
	return nil
}

// fewNames lists names for a message, at most eight of them.
func fewNames(names []string) string {
	if len(names) <= 8 {
		return strings.Join(names, ",")
	}
	return fmt.Sprintf("%s,... (%d nodes)", strings.Join(names[:8], ","), len(names))
}

// srunOwn tells srun's and slurmstepd's own lines from the agents'.
func srunOwn(line string) bool {
	if strings.HasPrefix(line, "srun: ") || strings.HasPrefix(line, "slurmstepd: ") {
		return true
	}
	node, ok := strings.CutPrefix(line, "slurmstepd-")
	if !ok {
		return false
	}
	i := strings.Index(node, ": ")
	return i > 0 && !strings.ContainsAny(node[:i], " \t")
}

// step is the srun command of the agents of n nodes: each finds its
// index in the job's node list (--slurm).
func (s slurmScheduler) step(spec *agentSpec, n int) *exec.Cmd {
	args := []string{"--overlap", "--nodes=" + strconv.Itoa(n), "--ntasks=" + strconv.Itoa(n),
		"--ntasks-per-node=1", "--kill-on-bad-exit=0", "--wait=0", immediate(s.cfg), "--export=ALL"}
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

// allocate runs `salloc <resources> monarch <rerun>` and returns its status:
// the inner monarch run does the work inside the allocation. parts is
// what sinfo said of the partitions (nil: it could not say).
func (s slurmHosts) allocate(ctx context.Context, cfg *RunConfig, parts []partition) (int, error) {
	args, err := allocArgs(s.cfg)
	if err != nil {
		return 0, err
	}
	if part, ok := findPartition(parts, s.partition()); ok && part.usable() < s.nodes() {
		fmt.Fprintf(cfg.Progress, "monarch: %s: %d of them can run jobs now; salloc waits for the others at most %s\n",
			part, part.usable(), s.immediateIs())
	}
	return s.salloc(ctx, cfg, append(args, immediate(s.cfg), "--job-name="+cfg.jobName()), cfg.rerun())
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
