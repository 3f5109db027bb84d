package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/monarch-go/monarch/hostsconfig"
	"github.com/monarch-go/monarch/internal/jobctl"
	"github.com/monarch-go/monarch/internal/topview"
	"github.com/monarch-go/monarch/launch"
	"github.com/urfave/cli/v2"
	"golang.org/x/term"
)

// monarch top shows a running job as it changes: the job state feed
// (jobctl.OpWatch on the job's control socket) drawn full screen by
// internal/topview, or, when it has no terminal, one snapshot in plain
// text.
func topCommand(a *app) *cli.Command {
	return &cli.Command{
		Name:      "top",
		Usage:     "show a running job's hosts, procs, actor meshes, events and log lines as they change (the newest running job's without JOB)",
		ArgsUsage: "[JOB]",
		Description: "Asks the job's client, through its control socket on this host, for the job's state as it\n" +
			"changes (at most every --interval) and shows it full screen: the hosts and their last\n" +
			"heartbeat; each proc mesh, per proc its host, pid, state, CPU% and memory; each actor mesh,\n" +
			"per member its proc, state (with the reason of a failure), calls sent and messages handled\n" +
			"and their rates per second; then the last supervision events and log lines, as the\n" +
			"terminal's height allows (sections cut short say how many rows they leave out). q or Ctrl-C\n" +
			"quits. When the job ends, top says so and exits with status 0, pointing to monarch logs.\n" +
			"With --once, or when stdin or stdout is not a terminal, it prints one snapshot in plain text\n" +
			"(rates from a second one, taken --interval later) and exits.",
		Flags: []cli.Flag{
			&cli.DurationFlag{Name: "interval", Value: jobctl.DefaultInterval, Usage: "the least time between two refreshes (at least 100ms, at most 1m)"},
			&cli.BoolFlag{Name: "once", Usage: "print one snapshot in plain text and exit"},
		},
		Action: func(c *cli.Context) error {
			interval := c.Duration("interval")
			if interval < jobctl.MinInterval || interval > time.Minute {
				return fmt.Errorf("top: --interval %v: want %v to 1m, such as 1s", interval, jobctl.MinInterval)
			}
			dir := hostsconfig.StateDir()
			j, err := runningJob(c.Context, "top", dir, c.Args().First())
			if err != nil {
				return err
			}
			w := &topWatch{dir: dir, job: j, path: jobctl.SocketPath(dir, j.Job), interval: interval}
			out, isFile := c.App.Writer.(*os.File)
			if c.Bool("once") || !isFile || !term.IsTerminal(int(out.Fd())) || !term.IsTerminal(int(os.Stdin.Fd())) {
				width := 0 // no terminal: no width to fit
				if isFile {
					width, _, _ = term.GetSize(int(out.Fd()))
				}
				return w.once(c.Context, c.App.Writer, width)
			}
			code, err := w.screen(c.Context, out, os.Stdin, c.App.Writer)
			a.code = code
			return err
		},
	}
}

// topWatch is a watch of one job's state.
type topWatch struct {
	dir      string
	job      *launch.JobState
	path     string // the job's control socket
	interval time.Duration
}

// jobEnded is how a watch ends when the job ends: its last record.
type jobEnded struct{ job *launch.JobState }

func (e *jobEnded) Error() string {
	return fmt.Sprintf("job %s ended (%s): monarch logs %[1]s shows its output", e.job.Job, stateText(e.job))
}

// once prints one snapshot, with rates from a second one when it comes
// within the interval and a margin.
func (w *topWatch) once(ctx context.Context, out io.Writer, width int) error {
	ctx, cancel := context.WithTimeout(ctx, w.interval+jobctl.DefaultStateTimeout+jobctl.IOTimeout)
	defer cancel()
	var got []*jobctl.JobState
	stop := make(chan struct{})
	timer := time.AfterFunc(w.interval+2*time.Second, func() { close(stop) })
	defer timer.Stop()
	req := jobctl.WatchRequest{Interval: w.interval}
	err := jobctl.CallStream(ctx, w.path, jobctl.OpWatch, req, stop, func(raw json.RawMessage) error {
		s, err := decodeState(raw)
		if err != nil {
			return err
		}
		if got = append(got, s); len(got) == 2 && timer.Stop() {
			close(stop)
		}
		return nil
	}, &jobctl.WatchAnswer{})
	if len(got) == 0 {
		if err == nil {
			err = errors.New("the job's client sent no snapshot")
		}
		return controlError(context.WithoutCancel(ctx), "top", w.dir, w.job, w.path, err)
	}
	s, prev := got[len(got)-1], (*jobctl.JobState)(nil)
	if len(got) > 1 {
		prev = got[len(got)-2]
	}
	return topview.Render(out, s, prev, width, 0)
}

// decodeState decodes a snapshot of the feed, of the version this
// monarch reads.
func decodeState(raw json.RawMessage) (*jobctl.JobState, error) {
	var s jobctl.JobState
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, fmt.Errorf("a snapshot from the job's client: %w", err)
	}
	if s.Version != jobctl.StateVersion {
		return nil, fmt.Errorf("the job's client writes state version %d; this monarch reads %d", s.Version, jobctl.StateVersion)
	}
	return &s, nil
}

// run sends the job's snapshots on states as they come until ctx ends
// (its error) or the job ends (a *jobEnded). An op ends after
// jobctl.MaxOpTime, and a connection may break: it asks again, unless
// the job ended meanwhile; it gives up after three calls in a row that
// gave nothing, or at once if the first call fails (as monarch stacks
// does).
func (w *topWatch) run(ctx context.Context, states chan<- *jobctl.JobState) error {
	req := jobctl.WatchRequest{Interval: w.interval}
	failed, ever := 0, false
	for {
		sent := false
		err := jobctl.CallStream(ctx, w.path, jobctl.OpWatch, req, nil, func(raw json.RawMessage) error {
			s, err := decodeState(raw)
			if err != nil {
				return err
			}
			sent = true
			select {
			case states <- s:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		}, &jobctl.WatchAnswer{})
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if ever = ever || sent; !ever && err != nil {
			return controlError(ctx, "top", w.dir, w.job, w.path, err)
		}
		if ended := w.ended(ctx, err); ended != nil {
			return ended
		}
		if failed = failed + 1; sent {
			failed = 0
		}
		if failed >= 3 {
			if err == nil {
				err = errors.New("the job's client sent no snapshot")
			}
			return controlError(ctx, "top", w.dir, w.job, w.path, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// endWait bounds the wait for a job's record to say it ended once its
// client stopped serving: the launcher records the end after tearing
// the job down.
const endWait = 30 * time.Second

// ended says whether the job ended, after a watch of it ended with err:
// when nothing serves the socket, the job is ending, and its record says
// so within endWait.
func (w *topWatch) ended(ctx context.Context, err error) *jobEnded {
	deadline := time.Now().Add(endWait)
	for {
		if jobs, serr := launch.Status(ctx, w.dir); serr == nil {
			if now, ferr := launch.Find(jobs, w.dir, w.job.Job); ferr == nil && !now.Active() {
				return &jobEnded{job: now}
			}
		}
		if !errors.Is(err, jobctl.ErrNotServing) || time.Now().After(deadline) {
			return nil // asked again: a cut connection or an op's end is seen again there
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// The terminal's controls top writes.
const (
	altScreenOn  = "\x1b[?1049h\x1b[?25l" // the alternate screen, no cursor
	altScreenOff = "\x1b[?25h\x1b[?1049l"
	clearLine    = "\x1b[K" // to the line's end
	clearBelow   = "\x1b[J"
	home         = "\x1b[H"
)

// screen shows the job full screen on out (a terminal, in raw mode, its
// keys read from in) until q or Ctrl-C (status 0), a signal (128 + its
// number), the job's end (status 0: it says so, then prints it on msgs
// once the screen is gone) or an error. The terminal is restored however
// it ends.
func (w *topWatch) screen(ctx context.Context, out, in *os.File, msgs io.Writer) (int, error) {
	old, err := term.MakeRaw(int(in.Fd()))
	if err != nil {
		return 0, fmt.Errorf("top: the terminal: %w", err)
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGWINCH)
	defer signal.Stop(sigs)
	restored := false
	restore := func() {
		if !restored {
			restored = true
			io.WriteString(out, altScreenOff)
			term.Restore(int(in.Fd()), old)
		}
	}
	defer restore() // a panic too
	io.WriteString(out, altScreenOn)

	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // the watch: its connection closes, the client's op ends
	states := make(chan *jobctl.JobState)
	done := make(chan error, 1)
	go func() { done <- w.run(ctx, states) }()
	keys := make(chan byte, 16)
	go readKeys(in, keys)
	v := &topScreen{out: out, job: w.job.Job, interval: w.interval, since: time.Now()}
	tick := time.NewTicker(w.interval) // redraws: the note's age, a size missed
	defer tick.Stop()
	for {
		v.draw()
		select {
		case s := <-states:
			v.prev, v.cur, v.since = v.cur, s, time.Now()
		case <-tick.C:
		case k := <-keys:
			if k == 'q' || k == 'Q' || k == 3 { // 3: Ctrl-C, a key in raw mode
				return 0, nil
			}
		case sig := <-sigs:
			if sig != syscall.SIGWINCH {
				return 128 + int(sig.(syscall.Signal)), nil
			}
		case err := <-done:
			var end *jobEnded
			if !errors.As(err, &end) {
				restore()
				return 0, err
			}
			// The view says so for a moment, then the message stays.
			v.note = end.Error() + " (q quits)"
			v.draw()
			select {
			case <-keys:
			case <-sigs:
			case <-time.After(2 * time.Second):
			}
			restore()
			fmt.Fprintln(msgs, "top:", end.Error())
			return 0, nil
		}
	}
}

// readKeys sends what is typed on in to keys, dropping keys nobody reads
// yet; it ends when in does.
func readKeys(in io.Reader, keys chan<- byte) {
	var b [64]byte
	for {
		n, err := in.Read(b[:])
		for _, k := range b[:n] {
			select {
			case keys <- k:
			default:
			}
		}
		if err != nil {
			return
		}
	}
}

// topScreen is what the screen shows: the last two snapshots and a
// note above them.
type topScreen struct {
	out       *os.File
	job       string
	interval  time.Duration
	cur, prev *jobctl.JobState
	since     time.Time // of cur (or of the start)
	note      string    // the job ended
}

// draw redraws the screen at its size now: a resize is seen at the next
// refresh at the latest (SIGWINCH makes it at once).
func (v *topScreen) draw() {
	width, height, err := term.GetSize(int(v.out.Fd()))
	if err != nil || width <= 0 || height <= 0 {
		width, height = 80, 24
	}
	note := v.note
	if stale := time.Since(v.since).Truncate(time.Second); note == "" && stale > max(5*time.Second, 3*v.interval) {
		if v.cur == nil {
			note = fmt.Sprintf("job %s: no state from its client for %v", v.job, stale)
		} else {
			note = fmt.Sprintf("no new snapshot for %v: nothing changed, or the job's client is busy", stale)
		}
	}
	var lines []string
	switch {
	case v.cur == nil && note == "":
		lines = []string{topview.Line("job "+v.job+": asking its client for its state", width)}
	case note != "":
		lines = append([]string{topview.Line(note, width)}, topview.Lines(v.cur, v.prev, width, height-1)...)
	default:
		lines = topview.Lines(v.cur, v.prev, width, height)
	}
	var b strings.Builder
	b.WriteString(home)
	for i, l := range lines {
		if i > 0 {
			b.WriteString("\r\n")
		}
		b.WriteString(l)
		b.WriteString(clearLine)
	}
	b.WriteString(clearBelow)
	io.WriteString(v.out, b.String())
}
