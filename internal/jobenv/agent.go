package jobenv

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// ClientID is the proc id of a job's client, the root of every job: the
// host agents report to it.
const ClientID = "c"

// AgentID is the id of the host agent of host i of a job (h0, h1, ...):
// the proc id it is addressed by, and the name of a simulated host.
func AgentID(i int) string { return "h" + strconv.Itoa(i) }

// IsAgentID tells the ids AgentID makes from the ids of procs.
func IsAgentID(s string) bool {
	if len(s) < 2 || s[0] != 'h' {
		return false
	}
	n, err := strconv.Atoi(s[1:])
	return err == nil && n >= 0 && AgentID(n) == s
}

// AgentArgs is the command line of `monarch agent`, which a launcher
// starts on every host. Argv builds it and ParseAgentArgs reads it: the
// flags are defined once, in agentFlags. The job's secret is never on the
// command line: it comes in the environment (Env.Bus.Token) or, with
// TokenStdin, on the first line of stdin.
type AgentArgs struct {
	Job string
	// Index is this host's rank in the job; with Slurm, the agent finds it
	// in the step's node list instead.
	Index      int
	Slurm      bool
	Program    string   // the job's program, run in worker mode for each proc
	Args       []string // its arguments
	Dir        string   // the procs' working directory
	Env        []string // KEY=VALUE for the procs
	TokenStdin bool     // read the secret from stdin, and exit at its EOF
	// ProgramSum is Program's sha256 (hex), as the launcher sent it: the
	// agent runs Program only if it has it; "" when it was not sent.
	ProgramSum string
}

// agentFlags defines the flags of `monarch agent` on fs, bound to a.
func agentFlags(fs *flag.FlagSet, a *AgentArgs) {
	fs.StringVar(&a.Job, "job", "", "the job's `ID` (required)")
	fs.IntVar(&a.Index, "index", -1, "this host's `INDEX` in the job")
	fs.BoolVar(&a.Slurm, "slurm", false, "take the index from the Slurm step (node name in the job's node list)")
	fs.StringVar(&a.Program, "program", "", "the job's `PROGRAM`, run in worker mode for each proc (required)")
	fs.Func("program-sha256", "run the program only if its sha256 is `SUM` (64 hex digits)", func(s string) error {
		if len(s) != 64 || strings.Trim(s, "0123456789abcdef") != "" {
			return errors.New("want 64 hex digits")
		}
		a.ProgramSum = s
		return nil
	})
	fs.StringVar(&a.Dir, "dir", "", "working `DIR` of the procs")
	fs.Func("env", "`KEY=VALUE` for the procs (repeatable)", func(s string) error {
		if k, _, ok := strings.Cut(s, "="); !ok || k == "" {
			return errors.New("want KEY=VALUE")
		}
		a.Env = append(a.Env, s)
		return nil
	})
	fs.BoolVar(&a.TokenStdin, "token-stdin", false, "read the job secret from the first line of stdin, and exit at EOF")
}

// Argv is the command line that runs a's agent with the monarch binary at
// monarch: `monarch agent FLAGS -- PROGRAM-ARGS`.
func (a AgentArgs) Argv(monarch string) []string {
	argv := []string{monarch, "agent", "--job", a.Job, "--program", a.Program}
	if a.ProgramSum != "" {
		argv = append(argv, "--program-sha256", a.ProgramSum)
	}
	if a.Dir != "" {
		argv = append(argv, "--dir", a.Dir)
	}
	if a.Slurm {
		argv = append(argv, "--slurm")
	} else {
		argv = append(argv, "--index", strconv.Itoa(a.Index))
	}
	for _, kv := range a.Env {
		argv = append(argv, "--env", kv)
	}
	if a.TokenStdin {
		argv = append(argv, "--token-stdin")
	}
	return append(append(argv, "--"), a.Args...)
}

// ParseAgentArgs reads the arguments of `monarch agent` (after the command
// name). On a bad command line it returns an error that says what is
// wrong; usage, if not nil, gets the flags' help for -h (and, with
// flag.ErrHelp, ParseAgentArgs returns).
func ParseAgentArgs(args []string, usage io.Writer) (AgentArgs, error) {
	var a AgentArgs
	fs := flag.NewFlagSet("monarch agent", flag.ContinueOnError)
	if usage == nil {
		usage = io.Discard
	}
	fs.SetOutput(usage)
	fs.Usage = fs.PrintDefaults // the flags alone: the caller has the usage line
	agentFlags(fs, &a)
	if err := fs.Parse(args); err != nil {
		return AgentArgs{}, err
	}
	a.Args = fs.Args()
	switch {
	case a.Job == "":
		return AgentArgs{}, errors.New("--job is required")
	case a.Program == "":
		return AgentArgs{}, errors.New("--program is required")
	case !a.Slurm && a.Index < 0:
		return AgentArgs{}, fmt.Errorf("--index %d: want 0 or more (this host's index), or --slurm", a.Index)
	}
	return a, nil
}
