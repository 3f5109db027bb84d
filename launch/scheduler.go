package launch

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/monarch-go/monarch/hostsconfig"
	"github.com/monarch-go/monarch/internal/jobenv"
)

// A scheduler gets a job's host agents running on the hosts of one kind
// of hosts file (its scheduler key). Run asks it where the job runs, then
// runs the job's bus and client itself and asks it to start the agents:
// nothing else of a run depends on the scheduler. Each scheduler lives in
// a file of its own (slurm.go, ssh.go, local.go) and registers there.
type scheduler interface {
	// prepare says where the job runs from here (see placement). It
	// blocks only on what it asks the scheduler, if anything.
	prepare(ctx context.Context) (*placement, error)
	// start starts one host agent on every host of p, as spec says, and
	// returns them running (their ends are reported on agents.ended). On
	// error it has stopped what it started.
	start(ctx context.Context, p *placement, spec *agentSpec) (*agents, error)
}

// A queue is a scheduler's own queue of batch jobs (Slurm's). With one, a
// job can be submitted and left to run (--detach); the job store records
// the batch job's id and asks the queue about it.
type queue interface {
	// current is the id of the queue's batch job this process runs in,
	// "" outside one.
	current() string
	// submit queues `monarch <b.rerun>` (cfg.Self) and returns the batch
	// job's id.
	submit(ctx context.Context, cfg *RunConfig, b batchJob) (string, error)
	// state is what the queue says of batch job id.
	state(ctx context.Context, id string) batchState
	// arrayStates is what the queue says of each task of batch array id,
	// by index, asked once; nil when it cannot say.
	arrayStates(ctx context.Context, id string) map[int]batchState
	// cancel ends batch job id, queued or running; graceful: by asking
	// the job's own monarch run to stop (SIGTERM), so that its program
	// gets its stop grace.
	cancel(ctx context.Context, id string, graceful bool) error
	// cancelArray ends every task of batch array id: those queued, and
	// the running ones gracefully.
	cancelArray(ctx context.Context, id string) error
}

// batchJob is what a queue is given to run: the job's monarch command
// line, its name in the queue, where its output goes, and the batch jobs
// it waits for, in the queue's terms (Slurm's --dependency; "" for none);
// for a batch array, its spec in sbatch's --array syntax (output then
// holds %a, each task's index).
type batchJob struct {
	rerun      []string
	name       string
	output     string
	dependency string
	array      string
}

// batchState is what a queue says of a batch job.
type batchState struct {
	// State in lower case ("pending", "running", "completing");
	// "finished" once it has ended or left the queue; "" when the queue
	// cannot say.
	State string
	// Reason is the queue's word on why it waits or ended
	// ("Resources", "TimeLimit"); "" for none.
	Reason string
	// Cause names how it ends or ended, as a user says it ("cancelled by
	// scancel", "time limit", "preempted"); "" when the queue cannot say
	// or it ended by itself.
	Cause string
	// Restarts is how many times the queue has run the job again (Slurm's
	// Restarts): once it is past the run's own count, the run is ending
	// because the job was requeued.
	Restarts int
}

// placement is where a job runs, as its scheduler prepared it.
type placement struct {
	// hosts names the hosts in the job's order: host i runs agent
	// jobenv.AgentID(i). None: no host agents, the program runs on this
	// machine alone.
	hosts []string
	// remote says the hosts are other machines, which must reach the bus
	// over the network.
	remote bool
	// route returns a host on the workers' side of the network (name or
	// address): unless the hosts file says what to advertise, the bus
	// advertises this machine's address on the route to it. Called only
	// then; nil for hosts that are not remote.
	route func(ctx context.Context) string
	// monarch is the monarch binary on the hosts, as the hosts file gives
	// it; "" for the launcher's own.
	monarch string
	// jobEnd is when the scheduler ends the job (a Slurm allocation's time
	// limit); zero for none.
	jobEnd time.Time
	// elsewhere, when set, runs the job instead of this launcher: the
	// hosts must first be got from the scheduler (salloc outside a Slurm
	// allocation). It returns the exit status.
	elsewhere func(ctx context.Context, cfg *RunConfig) (int, error)
}

// agentSpec is what every host agent of a job is started with.
type agentSpec struct {
	// args is the agent's command line but for where it finds its index
	// and its secret, which each scheduler sets.
	args    jobenv.AgentArgs
	monarch string // the monarch binary on the hosts
	// env is the agents' environment: the bus as the hosts dial it (with
	// the secret: the scheduler passes it on without putting it in argv),
	// the system log levels.
	env jobenv.Env
	// stderr receives the agents' stderr (a launcher process's last lines
	// also go in its agentEnd).
	stderr io.Writer
	// awaitAgents waits until at least n agents have reported on the bus,
	// ctx ends or limit fires (jobWatch.awaitHosts): a scheduler paces
	// its starts on it.
	awaitAgents func(ctx context.Context, n int, limit <-chan time.Time)
	// ship is what the scheduler sends to the hosts before it starts the
	// agents (ship.go); nil: nothing.
	ship *shipment
}

// kind is a scheduler as its file registers it.
type kind struct {
	name  string // the hosts file's scheduler key
	title string // as messages name it: "Slurm"
	// open returns the scheduler of hosts h: nil for the local kind means
	// no hosts file, the program on this machine alone.
	open  func(h *hostsconfig.Hosts) scheduler
	queue queue // nil: the scheduler has no queue of its own
}

// kinds holds the registered schedulers by name. It is written only by
// the init functions of the schedulers' files, and read after.
var kinds = map[string]kind{}

func register(k kind) { kinds[k.name] = k }

// kindOf is the kind of scheduler of hosts h; nil h is this machine.
func kindOf(h *hostsconfig.Hosts) (kind, error) {
	name := hostsconfig.SchedulerLocal
	if h != nil {
		name = h.Scheduler
	}
	k, ok := kinds[name]
	if !ok {
		return kind{}, fmt.Errorf("launch: no scheduler %q", name)
	}
	return k, nil
}

// queueKinds are the registered kinds with a queue, by name.
func queueKinds() []kind {
	var ks []kind
	for _, k := range kinds {
		if k.queue != nil {
			ks = append(ks, k)
		}
	}
	slices.SortFunc(ks, func(a, b kind) int { return strings.Compare(a.name, b.name) })
	return ks
}

// enclosingBatch names the batch job this process runs in, if any: the
// scheduler whose queue holds it, and its id there.
func enclosingBatch() (sched, id string) {
	for _, k := range queueKinds() {
		if id := k.queue.current(); id != "" {
			return k.name, id
		}
	}
	return "", ""
}
