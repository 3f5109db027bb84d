package cli

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/monarch-go/monarch/hostsconfig"
	"github.com/monarch-go/monarch/internal/arrayspec"
	"github.com/monarch-go/monarch/internal/jobenv"
	"github.com/monarch-go/monarch/internal/jobstate"
	"github.com/monarch-go/monarch/launch"
	"github.com/urfave/cli/v2"
)

func runCommand(a *app) *cli.Command {
	return &cli.Command{
		Name:      "run",
		Usage:     "run a job on the hosts of its " + jobenv.HostsVar + " file (Slurm, ssh or local)",
		ArgsUsage: "JOB.toml",
		Description: "Reads the job file, starts the job's bus and a host agent on every host (one srun step in a\n" +
			"Slurm allocation, salloc first outside one; one ssh session per host; or local processes),\n" +
			"runs the job's program as the client and exits with its status. The hosts file is the job's\n" +
			"`hosts`, else $" + jobenv.HostsVar + "; with neither the job runs on this machine.\n" +
			"\n" +
			"With --detach it prints the job's id and returns: a Slurm job is submitted with sbatch, any\n" +
			"other runs on here in the background. monarch logs -f ID, status ID and stop ID take the id\n" +
			"(or Slurm's job id). --nodes, --time, --partition and --job-name override the hosts file's\n" +
			"[slurm] keys for this run.\n" +
			"\n" +
			"--after-ok ID starts the job once job ID has ended with status 0 (sbatch's --dependency=afterok);\n" +
			"--after-any once it has ended, --after once it has started. Submitted to Slurm (--detach)\n" +
			"it waits in Slurm's queue; otherwise its launcher waits, and status shows it as pending\n" +
			"(after ok ID). A dependency that fails ends the job before it runs, as Slurm does.\n" +
			"\n" +
			"With --array SPEC (sbatch's syntax: 0-15, 1,3,7, 0-15:2, %N for at most N at once) or [array] in\n" +
			"the job file, the job runs as an array of tasks ID_I, each with MONARCH_ARRAY_INDEX (and, under\n" +
			"Slurm, SLURM_ARRAY_TASK_ID): one sbatch --array outside an allocation, else run from here. A\n" +
			"failed task leaves the others running unless --fail-fast. status, logs and stop take the array's\n" +
			"id or a task's (ID_3, ID:3).",
		Flags: append(runFlags("leave the job to run (sbatch on Slurm, in the background here otherwise); print its id"),
			&cli.IntFlag{Name: "nodes", Aliases: []string{"N"}, Usage: "allocate `N` nodes ([slurm] nodes)", Action: atLeast("nodes", 1, "nodes")},
			&cli.StringFlag{Name: "time", Aliases: []string{"t"}, Usage: "time limit `TIME` in Slurm's formats: MM, HH:MM:SS, D-HH:MM ([slurm] time)"},
			&cli.StringFlag{Name: "partition", Aliases: []string{"p"}, Usage: "Slurm partition `NAME` ([slurm] partition)"},
			&cli.StringFlag{Name: "job-name", Aliases: []string{"J"}, Usage: "name the Slurm job `NAME` (default: the job file's name)"},
		),
		Action: func(c *cli.Context) error {
			// One argument: prepare checks the count ArgsUsage shows.
			cfg, err := loadRun(c.Args().First())
			if err != nil {
				return err
			}
			if err := applyOverrides(c, &cfg); err != nil {
				return err
			}
			rerun := append([]string{"run"}, overrideArgs(c)...)
			if err := arrayOptions(c, &cfg, &rerun); err != nil {
				return err
			}
			if err := detachOptions(c, &cfg, rerun, cfg.JobPath); err != nil {
				return err
			}
			if err := taskOptions(c, &cfg); err != nil {
				return err
			}
			cfg.Stdout, cfg.Stderr, cfg.Progress = c.App.Writer, c.App.ErrWriter, c.App.ErrWriter
			code, err := launch.Run(c.Context, cfg)
			a.code = code
			return err
		},
	}
}

// runFlags are the flags of every command that runs a job, which
// detachOptions reads: --detach (detach says what it does there),
// --after, --after-ok and --after-any (afterOptions),
// --output, and the id a detached job's launcher takes (hidden: --detach
// gives it).
func runFlags(detach string) []cli.Flag {
	return []cli.Flag{
		&cli.BoolFlag{Name: "detach", Usage: detach},
		&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Usage: "with --detach, write the launcher's output to `FILE` (default: ID.out in the job store)"},
		&cli.StringFlag{Name: "job-id", Hidden: true, Usage: "run as job `ID`, submitted before"},
		&cli.StringSliceFlag{Name: "after", Usage: "start once job `ID` has started, or ended without starting (IDs separated by commas; repeat for more)"},
		&cli.StringSliceFlag{Name: "after-ok", Usage: "start once job `ID` has ended with status 0; if it fails, this job never runs"},
		&cli.StringSliceFlag{Name: "after-any", Usage: "start once job `ID` has ended, however it ended"},
		&cli.StringFlag{Name: "array", Usage: "run the job as an array of tasks, as sbatch --array: `SPEC` is 0-15, 1,3,7, 0-15:2, with %N for at most N at once ([array] spec)"},
		&cli.BoolFlag{Name: "fail-fast", Usage: "an array: when a task fails, stop the others ([array] fail_fast)"},
		&cli.StringFlag{Name: "array-index", Hidden: true, Usage: "run as task `I` of the array --job-id names (slurm: SLURM_ARRAY_TASK_ID)"},
	}
}

// afterOptions sets cfg.After from --after, --after-ok and --after-any.
func afterOptions(c *cli.Context, cfg *launch.RunConfig) error {
	var err error
	for _, k := range []struct{ flag, kind string }{
		{"after", jobstate.AfterStart}, {"after-ok", jobstate.AfterOK}, {"after-any", jobstate.AfterAny},
	} {
		if cfg.After, err = launch.ParseAfter(cfg.After, k.kind, c.StringSlice(k.flag)); err != nil {
			return err
		}
	}
	return nil
}

// arrayOptions sets cfg's job's array from --array and --fail-fast, and
// adds --array to rerun (the command line that runs the job, or its
// tasks, again).
func arrayOptions(c *cli.Context, cfg *launch.RunConfig, rerun *[]string) error {
	job := cfg.Job
	if c.IsSet("array") {
		sp, err := arrayspec.Parse(c.String("array"))
		if err != nil {
			return usagef(c, "--array: %v", err)
		}
		if job.Array, err = job.Array.WithSpec(sp, cfg.JobPath); err != nil {
			return err
		}
		*rerun = append(*rerun, "--array="+sp.String())
	}
	if c.Bool("fail-fast") {
		if job.Array == nil {
			return usagef(c, "--fail-fast stops an array's tasks when one fails: give --array, or a job file with [array]")
		}
		job.Array.FailFast = true
	}
	if job.Array != nil && c.IsSet("output") {
		return usagef(c, "--output: each task of an array writes its own output (ID_I.out in the job store)")
	}
	return nil
}

// taskOptions sets cfg's task from --array-index, once detachOptions has
// read --job-id: a local array's launcher names the task's own id
// (ID_I), Slurm's batch array the array's.
func taskOptions(c *cli.Context, cfg *launch.RunConfig) error {
	if !c.IsSet("array-index") {
		return nil
	}
	text := c.String("array-index")
	if text == launch.SlurmArrayIndex {
		if text = os.Getenv("SLURM_ARRAY_TASK_ID"); text == "" {
			return errors.New("--array-index=slurm: SLURM_ARRAY_TASK_ID is not set (not a task of a Slurm batch array)")
		}
	}
	i, err := strconv.Atoi(text)
	switch {
	case err != nil || i < 0:
		return fmt.Errorf("--array-index %q: want a task's index", text)
	case cfg.Job.Array == nil:
		return errors.New("--array-index: the job is no array (no --array, no [array])")
	case cfg.JobID == "":
		return errors.New("--array-index: give the array's --job-id")
	}
	cfg.ArrayIndex = i
	cfg.ArrayJob = strings.TrimSuffix(cfg.JobID, "_"+strconv.Itoa(i))
	return nil
}

// jobIDPattern is what jobstate.NewID makes.
var jobIDPattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// detachOptions sets cfg's detach fields from c's flags: the job id a
// submit gave this run, --detach, and the command line that runs the job
// again (rerun, then its arguments: under salloc, or detached); and the
// jobs it waits for.
func detachOptions(c *cli.Context, cfg *launch.RunConfig, rerun []string, args ...string) error {
	if err := afterOptions(c, cfg); err != nil {
		return err
	}
	if id := c.String("job-id"); id != "" {
		if !jobIDPattern.MatchString(id) {
			return fmt.Errorf("--job-id %q: want letters, digits, '-' or '_'", id)
		}
		cfg.JobID = id
	}
	cfg.Detach = c.Bool("detach")
	if c.IsSet("output") {
		if !cfg.Detach {
			return usagef(c, "--output is where a detached job's output goes: add --detach")
		}
		out, err := filepath.Abs(c.String("output"))
		if err != nil {
			return err
		}
		cfg.Output = out
	}
	if cfg.Detach && cfg.JobID != "" {
		return errors.New("--detach: the job is already detached (--job-id)")
	}
	cfg.Rerun = append(rerun, args...)
	return nil
}

// applyOverrides applies --nodes, --time, --partition and --job-name to
// the job's Slurm hosts, checked as the hosts file's keys are.
func applyOverrides(c *cli.Context, cfg *launch.RunConfig) error {
	var set []string
	for _, f := range []string{"nodes", "time", "partition", "job-name"} {
		if c.IsSet(f) {
			set = append(set, "--"+f)
		}
	}
	if len(set) == 0 {
		return nil
	}
	h := cfg.Hosts
	if h == nil || h.Scheduler != hostsconfig.SchedulerSlurm {
		where := "the job has no hosts file: it runs on this machine"
		if h != nil {
			where = fmt.Sprintf("%s says scheduler = %q", hostsName(h), h.Scheduler)
		}
		return fmt.Errorf("%s: for Slurm jobs only, and %s", set[0], where)
	}
	s := *h.Slurm // the file's settings stay as read
	s.Flags = map[string]string{}
	for _, f := range []string{"nodes", "time", "partition"} {
		if c.IsSet(f) {
			s.Flags[f] = "--" + f
		}
	}
	if c.IsSet("nodes") {
		s.Nodes = c.Int("nodes")
	}
	if c.IsSet("partition") {
		p := c.String("partition")
		if p == "" || !slurmName.MatchString(p) {
			return fmt.Errorf("--partition %q: want a Slurm partition name (letters, digits, '-', '_', '.')", p)
		}
		s.Partition = p
	}
	if c.IsSet("time") {
		t := c.String("time")
		limit, ok := hostsconfig.SlurmTimeLimit(t)
		if !ok {
			return fmt.Errorf("--time %q: want a Slurm time limit: MM, MM:SS, HH:MM:SS, D-HH, D-HH:MM or D-HH:MM:SS (30, 4:00:00, 1-12:00)", t)
		}
		s.Time = t
		if s.SignalBefore >= limit {
			s.SignalBefore = limit / 2 // as for a short time in the file: warn half way
		}
	}
	if c.IsSet("job-name") {
		n := c.String("job-name")
		if n == "" || len(n) > 128 || !slurmName.MatchString(n) {
			return fmt.Errorf("--job-name %q: want at most 128 letters, digits, '-', '_' or '.'", n)
		}
		cfg.JobName = n
	}
	hc := *h
	hc.Slurm = &s
	cfg.Hosts = &hc
	return nil
}

var slurmName = regexp.MustCompile(`^[A-Za-z0-9_.-]+$`)

// overrideArgs are the override flags c was given, as a detached job's
// launcher takes them again.
func overrideArgs(c *cli.Context) []string {
	var args []string
	if c.IsSet("nodes") {
		args = append(args, "--nodes="+strconv.Itoa(c.Int("nodes")))
	}
	for _, f := range []string{"time", "partition", "job-name"} {
		if c.IsSet(f) {
			args = append(args, "--"+f+"="+c.String(f))
		}
	}
	return args
}

func hostsName(h *hostsconfig.Hosts) string {
	if h.Path == "" {
		return "the job file's [hosts]"
	}
	return h.Path
}

// loadRun reads a job file and the hosts it runs on.
func loadRun(path string) (launch.RunConfig, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return launch.RunConfig{}, err
	}
	job, err := hostsconfig.LoadJob(path) // errors name the file as the user did
	if err != nil {
		return launch.RunConfig{}, err
	}
	cfg := launch.RunConfig{Job: job, JobPath: abs, Hosts: job.Hosts}
	if cfg.Hosts == nil {
		if p := os.Getenv(jobenv.HostsVar); p != "" {
			if cfg.Hosts, err = hostsconfig.LoadHosts(p); err != nil {
				return launch.RunConfig{}, fmt.Errorf("$%s: %w", jobenv.HostsVar, err)
			}
		}
	}
	if cfg.Hosts != nil {
		cfg.HostsPath = cfg.Hosts.Path
	}
	return cfg, nil
}
