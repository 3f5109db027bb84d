package jobenv

import (
	"bufio"
	"bytes"
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
// flags are defined once, in agentFlags. No secret is on the command line,
// which every user of the host can read: not the job's token, which comes
// in the environment (Env.Bus.Token), over the agent's link (under Slurm
// with TLS) or, with TokenStdin, on the first line of stdin; nor the
// procs' variables (the job file's [env]), which come sealed under the
// token (Env.SealedEnv), in the environment or, with TokenStdin, on the
// second line of stdin.
type AgentArgs struct {
	Job string
	// Index is this host's rank in the job; with Slurm, the agent finds it
	// in the step's node list instead.
	Index      int
	Slurm      bool
	Program    string   // the job's program, run in worker mode for each proc
	Args       []string // its arguments
	Dir        string   // the procs' working directory
	TokenStdin bool     // read the secret and the sealed [env] from stdin, and exit at its EOF
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
	fs.BoolVar(&a.TokenStdin, "token-stdin", false, "read the job secret from the first line of stdin, the procs' sealed variables from the second, and exit at EOF")
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

// maxTokenLine bounds the token's line on an agent's stdin.
const maxTokenLine = 1 << 10

// WriteSecrets writes, for an agent started with TokenStdin, what it reads
// first on its stdin (ReadSecrets): the job's token, then its procs'
// sealed variables (Env.SealedEnv, "" for none), a line each.
func WriteSecrets(w io.Writer, token, sealedEnv string) error {
	_, err := io.WriteString(w, token+"\n"+sealedEnv+"\n")
	return err
}

// ReadSecrets reads what WriteSecrets wrote, each line bounded; r then
// holds the rest of stdin.
func ReadSecrets(r *bufio.Reader) (token, sealedEnv string, err error) {
	tok, err := readLine(r, maxTokenLine)
	if err != nil {
		return "", "", fmt.Errorf("read the job secret from stdin: %w", err)
	}
	sealed, err := readLine(r, MaxSealedEnv)
	if err != nil {
		return "", "", fmt.Errorf("read the procs' sealed variables from stdin: %w", err)
	}
	return string(tok), string(sealed), nil
}

// readLine reads a line of at most limit bytes, without its newline.
func readLine(r *bufio.Reader, limit int) ([]byte, error) {
	var line []byte
	for {
		chunk, err := r.ReadSlice('\n')
		if len(line)+len(chunk) > limit+1 {
			return nil, fmt.Errorf("a line of more than %d bytes", limit)
		}
		line = append(line, chunk...)
		switch {
		case err == nil:
			return bytes.TrimRight(line, "\r\n"), nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF):
			return nil, fmt.Errorf("stdin ended after %d bytes, before the end of the line", len(line))
		default:
			return nil, err
		}
	}
}
