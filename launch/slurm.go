package launch

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/monarch-go/monarch/bus"
	"github.com/monarch-go/monarch/hostsconfig"
)

// Slurm. Inside an allocation (SLURM_JOB_ID set) the agents run as one
// srun step with one task per node; outside, `monarch run` re-runs itself
// under salloc with the job's resources, or submits itself with sbatch
// (--detach). Slurm's own errors (a bad partition, an impossible request)
// come back within seconds: requests carry --immediate, and the test
// cluster sets EnforcePartLimits.

// inAllocation reports whether this process runs inside a Slurm allocation.
func inAllocation() bool { return os.Getenv("SLURM_JOB_ID") != "" }

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

// allocate runs `salloc <resources> monarch run JOB` and returns its status:
// the inner monarch run does the work inside the allocation.
func allocate(ctx context.Context, cfg RunConfig) (int, error) {
	args, err := allocArgs(cfg.Hosts.Slurm)
	if err != nil {
		return 0, err
	}
	args = append(args, immediate(cfg.Hosts.Slurm), "--job-name=monarch", cfg.Monarch, "run", cfg.JobPath)
	cmd := exec.Command("salloc", args...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, cfg.Stdout, cfg.Stderr
	cmd.Env = os.Environ()
	if err := startOnLockedThread(cmd); err != nil {
		return 0, fmt.Errorf("slurm: salloc: %w", err)
	}
	return wait(ctx, cmd, cfg.Grace+5*time.Second), nil
}

// submit runs `sbatch <resources> --wrap "monarch run JOB"` and returns
// the Slurm job id.
func submit(cfg RunConfig) (string, error) {
	args, err := allocArgs(cfg.Hosts.Slurm)
	if err != nil {
		return "", err
	}
	out := cfg.StateDir + "/slurm-%j.out"
	args = append(args, "--parsable", "--job-name=monarch", "--output="+out,
		"--wrap="+shellQuote(cfg.Monarch)+" run "+shellQuote(cfg.JobPath))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sbatch", args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	b, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("slurm: sbatch: %v: %s", err, strings.TrimSpace(stderr.String()))
	}
	id, _, _ := strings.Cut(strings.TrimSpace(string(b)), ";")
	if id == "" {
		return "", fmt.Errorf("slurm: sbatch printed no job id")
	}
	return id, nil
}

// startSrun starts the agents as one srun step over every node of the
// allocation.
func startSrun(nodes []string, cfg RunConfig, jobID, url, token string, dialEnv []string, stderr io.Writer) (*agents, error) {
	s := cfg.Hosts.Slurm
	args := []string{"--overlap", "--nodes=" + strconv.Itoa(len(nodes)), "--ntasks=" + strconv.Itoa(len(nodes)),
		"--ntasks-per-node=1", "--kill-on-bad-exit=1", immediate(s), "--export=ALL"}
	if s != nil {
		args = append(args, s.SrunArgs...)
	}
	args = append(args, agentCommand(cfg.Monarch, jobID, cfg.Job, "slurm")...)
	cmd := exec.Command("srun", args...)
	// The secret travels in the step's environment, never in argv.
	cmd.Env = append(append(os.Environ(), bus.EnvURL+"="+url, bus.EnvToken+"="+token), dialEnv...)
	cmd.Stdout = os.Stdout
	a := &agents{n: len(nodes), ended: make(chan agentEnd, 1)}
	ids := make([]string, len(nodes))
	for i := range ids {
		ids[i] = "h" + strconv.Itoa(i)
	}
	if err := a.start("srun step", ids, cmd, stderr); err != nil {
		return nil, fmt.Errorf("slurm: %w", err)
	}
	return a, nil
}

// shellQuote quotes s for a POSIX shell.
func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("/._-=:,+@%", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// nodeAddr asks Slurm for a node's address (NodeAddr), which may differ
// from its name.
func nodeAddr(node string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
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
