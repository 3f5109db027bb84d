package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"regexp"
	"time"

	"github.com/monarch-go/monarch/hostsconfig"
	"github.com/monarch-go/monarch/logagg"
	"github.com/urfave/cli/v2"
)

func logsCommand() *cli.Command {
	cmd := &cli.Command{
		Name:      "logs",
		Usage:     "print a job's output (the newest job's without JOB), or follow it while it runs",
		ArgsUsage: "[JOB]",
		Description: "Replays the log the client keeps of every line the job's procs wrote, as [rank] text\n" +
			"([mesh rank] text when procs of several meshes wrote; [client] text for the job's client\n" +
			"program), stderr lines on stderr. With --follow it then waits for new lines until the job ends.\n" +
			"With --aggregate, similar lines are printed once per window with their count. Flags may\n" +
			"come before or after JOB.",
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "follow", Aliases: []string{"f"}, Usage: "wait for new lines until the job ends"},
			&cli.StringFlag{Name: "since", Usage: "only lines since `WHEN`: this long ago (10m) or an RFC3339 time"},
			&cli.StringSliceFlag{Name: "host", Usage: "only lines of this `HOST` (repeat for more)"},
			&cli.StringSliceFlag{Name: "mesh", Usage: "only lines of the procs of this `MESH` (repeat for more)"},
			&cli.IntSliceFlag{Name: "rank", Usage: "only lines of this `RANK` (repeat for more)"},
			&cli.StringFlag{Name: "stream", Usage: "only lines of this `STREAM`: stdout or stderr"},
			&cli.StringFlag{Name: "grep", Usage: "only lines matching this `REGEXP` (Go syntax)"},
			&cli.BoolFlag{Name: "raw", Usage: "print every line (the default)"},
			&cli.StringFlag{Name: "aggregate", Usage: "group similar lines per `WINDOW` (3s) of their timestamps, of wall time when following"},
		},
	}
	cmd.Action = func(c *cli.Context) error {
		args := c.Args().Slice() // at most one: checked with the usage
		opts, err := logsOptionsFrom(c, time.Now())
		if err != nil {
			return err
		}
		dir := hostsconfig.StateDir()
		ref := ""
		if len(args) == 1 {
			ref = args[0]
		}
		job, rec, err := logsJob(c.Context, dir, ref, opts.follow)
		if err != nil {
			return err
		}
		// Ctrl-C ends a follow cleanly: the last window is still printed.
		ctx, stop := signal.NotifyContext(c.Context, os.Interrupt)
		defer stop()
		if opts.follow && rec != nil {
			if err := awaitLog(ctx, dir, rec, c.App.ErrWriter); err != nil {
				if errors.Is(err, context.Canceled) {
					return nil
				}
				return err
			}
		} else if rec != nil && !hasLog(dir, job) {
			return noLogYet(rec, c.App.ErrWriter)
		}
		err = runLogs(ctx, dir, job, opts, c.App.Writer, c.App.ErrWriter)
		if opts.follow && err == nil && ctx.Err() == nil {
			sayEnd(ctx, dir, job, c.App.ErrWriter)
		}
		return err
	}
	return cmd
}

// logsOptions is what the flags ask for.
type logsOptions struct {
	filter logagg.Filter
	follow bool
	window time.Duration // 0: raw
}

func logsOptionsFrom(c *cli.Context, now time.Time) (logsOptions, error) {
	o := logsOptions{follow: c.Bool("follow")}
	if s := c.String("since"); s != "" {
		t, err := logagg.ParseSince(s, now)
		if err != nil {
			return o, fmt.Errorf("logs: --since %q: %w", s, err)
		}
		o.filter.Since = t
	}
	o.filter.Hosts = c.StringSlice("host")
	o.filter.Meshes = c.StringSlice("mesh")
	o.filter.Ranks = c.IntSlice("rank")
	stream, err := logagg.ParseStream(c.String("stream"))
	if err != nil {
		return o, fmt.Errorf("logs: --stream %q: %w", c.String("stream"), err)
	}
	o.filter.Stream = stream
	if s := c.String("grep"); s != "" {
		re, err := regexp.Compile(s)
		if err != nil {
			return o, fmt.Errorf("logs: --grep: %w", err)
		}
		o.filter.Grep = re
	}
	if s := c.String("aggregate"); s != "" {
		if c.Bool("raw") {
			return o, errors.New("logs: --raw and --aggregate: choose one")
		}
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 {
			return o, fmt.Errorf("logs: --aggregate %q: want a window such as 3s or 500ms", s)
		}
		o.window = d
	}
	return o, nil
}

func runLogs(ctx context.Context, dir, job string, o logsOptions, stdout, stderr io.Writer) error {
	p := logagg.NewPrinter(stdout, stderr)
	// Lines already written are grouped by their own timestamps; once
	// caught up, a follow groups the lines that come by wall time.
	live := false
	// Read unfiltered, so that a selection that matches nothing can say
	// what the job has (see logsSelection).
	sel := newLogsSelection(o.filter)
	emit := func(l logagg.Line) error {
		if !sel.take(l) {
			return nil
		}
		now := l.Time
		if live {
			now = time.Now()
		}
		return p.Print(l, o.window, now)
	}
	var err error
	if o.follow {
		err = logagg.Follow(ctx, dir, job, logagg.Filter{}, emit, func() error {
			live = true
			return p.Tick(time.Now())
		})
	} else {
		err = logagg.Read(ctx, dir, job, logagg.Filter{}, false, emit)
	}
	if ferr := p.Flush(); err == nil {
		err = ferr
	}
	switch {
	case errors.Is(err, context.Canceled):
		return nil // the user stopped following
	case errors.Is(err, logagg.ErrCorrupt):
		fmt.Fprintf(stderr, "monarch: %v\n", err) // a warning: the rest was printed
	case err != nil:
		return err
	}
	if err := sel.err(job, false); err != nil {
		if ended, _ := logagg.Ended(dir, job); !o.follow && !ended {
			err = sel.err(job, true) // said while the job runs, it may not stay true
		}
		return err
	}
	return nil
}
