package cli

import (
	"bufio"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"

	"github.com/monarch-go/monarch/internal/hostagent"
	"github.com/monarch-go/monarch/internal/jobenv"
	"github.com/monarch-go/monarch/launch"
	"github.com/urfave/cli/v2"
)

// agentCommand is what the launchers start on every host; users do not
// run it, so it is hidden from help. Its command line is the launchers'
// (jobenv.AgentArgs), parsed by jobenv.ParseAgentArgs: the flags are
// defined there once, for the side that writes them and this one.
func agentCommand(a *app) *cli.Command {
	cmd := &cli.Command{
		Name:            "agent",
		Hidden:          true,
		Usage:           "serve as a job's host agent (started by monarch run)",
		ArgsUsage:       "--job ID --program PROGRAM (--index INDEX | --slurm) [options] -- [ARGS...]",
		SkipFlagParsing: true,
	}
	// Every argument is ParseAgentArgs's, left as written: the command
	// line's rewriting must not move flags ahead of values it does not
	// know take them.
	a.programArgs[cmd] = func(string) bool { return true }
	cmd.Action = func(c *cli.Context) error {
		var help bytes.Buffer
		args, err := jobenv.ParseAgentArgs(c.Args().Slice(), &help)
		switch {
		case errors.Is(err, flag.ErrHelp):
			cli.HelpPrinter(c.App.Writer, agentHelpTemplate, c.Command)
			_, err := c.App.Writer.Write(help.Bytes())
			return err
		case err != nil:
			return usagef(c, "%s", flagError(nil, err))
		}
		env, err := jobenv.FromEnviron()
		if err != nil {
			return fmt.Errorf("agent: %w", err)
		}
		if args.Slurm {
			i, err := slurmIndex()
			if err != nil {
				return err
			}
			args.Index = i
		}
		var stdin io.Reader
		jobenv.UnsetSecret()
		if args.TokenStdin {
			r := bufio.NewReader(os.Stdin)
			if env.Bus.Token, env.SealedEnv, err = jobenv.ReadSecrets(r); err != nil {
				return fmt.Errorf("agent: %w", err)
			}
			stdin = r
		}
		if err := hostagent.Run(c.Context, args, env, stdin); err != nil {
			// Named by its host, as users know it: the launcher reads the
			// host from this line for the message that reports the end.
			fmt.Fprintf(c.App.ErrWriter, "monarch agent on %s: %v\n", agentHost(env), err)
			a.code = 1
		}
		return nil
	}
	return cmd
}

// agentHost is the host an agent runs on: a simulated host's name, else
// this machine's.
func agentHost(env jobenv.Env) string {
	if env.HostName != "" {
		return env.HostName
	}
	if h, err := os.Hostname(); err == nil {
		return h
	}
	return "this host"
}

// agentHelpTemplate heads the agent's help as urfave/cli heads the other
// commands'; the options follow, as ParseAgentArgs writes them.
const agentHelpTemplate = `NAME:
   {{template "helpNameTemplate" .}}

USAGE:
   {{template "usageTemplate" .}}

OPTIONS:
`

// slurmIndex finds this node in the job's node list: the step's own
// SLURM_NODEID is relative to the step, the job's list is what every
// agent agrees on.
func slurmIndex() (int, error) {
	name := os.Getenv("SLURMD_NODENAME")
	nodes, err := launch.ExpandHostlist(os.Getenv("SLURM_JOB_NODELIST"))
	if err == nil && name != "" {
		for i, n := range nodes {
			if n == name {
				return i, nil
			}
		}
	}
	if id, err := strconv.Atoi(os.Getenv("SLURM_NODEID")); err == nil {
		return id, nil
	}
	return 0, errors.New("agent: --slurm outside a Slurm step (no SLURMD_NODENAME in SLURM_JOB_NODELIST, no SLURM_NODEID)")
}
