package launch

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/monarch-go/monarch/internal/bincache"
)

// Shipping over ssh: per host, one session runs bincache's check (what
// the host has, or can copy from a binary's path), then one session per
// binary it lacks runs bincache's receive with the binary on stdin. Only
// sh, cat, stat, readlink, sha256sum, mkdir, mv and chmod run on the
// host: the monarch binary may be among those sent.
// Hosts are shipped to in parallel, at most [ssh] parallel at once.

// ship sends s.bins to the hosts that lack them, and records in s.at what
// each host runs: the cached copies. The error names every host that
// failed, and why.
func (ss sshScheduler) ship(ctx context.Context, hosts []string, s *shipment) error {
	if s == nil {
		return nil
	}
	start := time.Now()
	s.at = make([][]string, len(hosts))
	errs := make([]error, len(hosts))
	parallel := max(ss.cfg.Parallel, 1)
	sem := make(chan struct{}, parallel)
	var wg sync.WaitGroup
	for h, host := range hosts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			s.at[h], errs[h] = ss.shipTo(ctx, host, s)
		}()
	}
	wg.Wait() // each session is bounded (runTool)
	s.report("ssh", time.Since(start))
	return errors.Join(errs...)
}

// shipTo makes host have s.bins in its cache and returns the path of
// each there.
func (ss sshScheduler) shipTo(ctx context.Context, host string, s *shipment) ([]string, error) {
	out, errOut, err := ss.remote(ctx, host, bincache.CheckArgv(s.cache, s.mode(), s.bins, s.paths), nil, shipCheckTimeout)
	if sshFailed(err) {
		return nil, sshCheckFailed(host, err, errOut)
	}
	rs := replies(out)
	if err != nil || len(rs) == 0 {
		return nil, fmt.Errorf("ssh %s: check its binary cache: %v: %s", host, err, tailOf(errOut, 3))
	}
	at := make([]string, len(s.bins))
	var need []int
	refused := map[int]bincache.Reply{}
	for _, r := range rs {
		switch {
		case r.Word == "notool":
			return nil, fmt.Errorf("ssh %s: cannot check the binaries sent to it: %s", host, r.Rest)
		case r.Word == "unsafe" && r.Index < 0:
			return nil, fmt.Errorf("ssh %w", s.unsafeCache(host, r.Rest))
		case r.Index >= len(s.bins) || r.Index < 0:
		case r.Word == "have":
			at[r.Index] = r.Rest
		case r.Word == "bad" || r.Word == "unsafe": // then copied or need
			refused[r.Index] = r
		case r.Word == "copied":
			if b, ok := refused[r.Index]; ok {
				s.refused(host, r.Index, b, "copying it from "+s.paths[r.Index])
			}
			at[r.Index] = r.Rest
		case r.Word == "untrusted":
			s.untrusted(host, r.Index, r)
		case r.Word == "need":
			if b, ok := refused[r.Index]; ok {
				s.refused(host, r.Index, b, sendingAgain)
			}
			need = append(need, r.Index)
		case r.Word == "fail":
			return nil, fmt.Errorf("ssh %s: %s", host, s.why(r.Index, r))
		}
	}
	for _, i := range need {
		entry, err := ss.send(ctx, host, s, i)
		if err != nil {
			return nil, err
		}
		at[i] = entry
		s.sent(i, host)
	}
	for i, p := range at {
		if p == "" {
			return nil, fmt.Errorf("ssh %s: the check of its binary cache said nothing of %s: %s", host, s.named(i), tailOf(errOut, 3))
		}
	}
	return at, nil
}

// sshCheckFailed is the error of a host whose ssh session for the check
// failed (ssh's own failure: status 255), as the agent's session would
// report it: the job cannot run there, and nothing unchecked runs.
func sshCheckFailed(host string, err error, said []byte) error {
	lines := strings.Split(strings.TrimSpace(string(said)), "\n")
	e := agentEnd{what: "ssh " + host, err: err, lines: lines[:min(len(lines), maxShownLines)], cause: "checking its binary cache"}
	if c, ok := firstCause(lines, causeContext{session: host}.readSSH); ok {
		e.cause += ": " + c.msg
	}
	return fmt.Errorf("%s%s", e, e.said())
}

// send sends bins[i] to host, and again once if the host refuses it;
// it returns where the host keeps it.
func (ss sshScheduler) send(ctx context.Context, host string, s *shipment, i int) (string, error) {
	for attempt := 1; ; attempt++ {
		f, err := os.Open(s.bins[i].Path)
		if err != nil {
			return "", fmt.Errorf("ship %s: %w", s.named(i), err)
		}
		out, errOut, err := ss.remote(ctx, host, bincache.ReceiveArgv(s.cache, i, s.bins[i]), f, shipTimeout)
		f.Close()
		rs := replies(out)
		var r bincache.Reply
		if len(rs) == 1 {
			r = rs[0]
		}
		switch {
		case r.Word == "ok":
			return r.Rest, nil
		case r.Word == "unsafe" && r.Index < 0:
			return "", fmt.Errorf("ssh %w", s.unsafeCache(host, r.Rest))
		case r.Word == "":
			r = bincache.Reply{Word: "fail", Index: i, Rest: fmt.Sprintf("%s: %s", describeErr(err), tailOf(errOut, 3))}
		}
		then := sendingAgain
		if attempt == 2 {
			then = ""
		}
		why := s.refused(host, i, r, then)
		if attempt == 2 {
			return "", fmt.Errorf("ssh %s: %s (sent twice)", host, why)
		}
	}
}

// describeErr is a tool's end in a few words.
func describeErr(err error) string {
	var ee *exec.ExitError
	switch {
	case err == nil:
		return "no answer"
	case errors.As(err, &ee):
		return fmt.Sprintf("exit status %d", ee.ExitCode())
	}
	return err.Error()
}

// remote runs argv on host over ssh, with stdin (nil: none), bounded by
// limit.
func (ss sshScheduler) remote(ctx context.Context, host string, argv []string, stdin *os.File, limit time.Duration) ([]byte, []byte, error) {
	cmd := exec.Command("ssh", append(sshArgs(ss.cfg, host), shellJoin(argv))...)
	if stdin != nil {
		cmd.Stdin = stdin
	}
	return runTool(ctx, cmd, limit)
}

// sshFailed tells ssh's own failure (status 255: no connection, no
// login) from the remote command's.
func sshFailed(err error) bool {
	var ee *exec.ExitError
	return errors.As(err, &ee) && ee.ExitCode() == 255
}
