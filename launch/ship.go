package launch

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/monarch-go/monarch/hostsconfig"
	"github.com/monarch-go/monarch/internal/bincache"
	"github.com/monarch-go/monarch/internal/child"
)

// Shipping: before the agents start, the launcher makes sure every host
// has the monarch binary the agents run and the job's program, as they
// are here, by content (sha256), in the host's binary cache
// (internal/bincache): over ssh (shipssh.go) or with Slurm's sbcast
// (shipslurm.go). The agents then run the cached copies, and only them:
// a cache that another user could write to (it or a folder above it),
// and a copy that fails its checksum, are refused where they are used.
// [ship] send = "auto" (the default) takes a binary from its path on a
// host that has the same file there, in folders no one else can write,
// as a copy in the cache (hashed: what is hashed is what runs) rather
// than send it; true always sends what the cache lacks; false sends
// nothing and runs the binaries from their paths, as the user said, the
// agent still refusing a program another user could have put there.
//
// What is sent:
//   - monarch: this launcher's own binary (RunConfig.Self), unless
//     [slurm]/[ssh] monarch names another and send is "auto": the hosts
//     have that one, which need not be this one;
//   - the program of an SDK job. An [spmd] job's command is the hosts'
//     own (python3, torchrun): not sent.
//
// A binary that fails its checksum or the rule where it is used (a cached
// copy, or one that just arrived) is refused (removed, never run) and
// sent again, once; failing again, the job fails, naming the host and the
// binary. So does a check, a copy or a transfer that fails: nothing runs
// from a path unchecked. The agent gets the program's sum
// (jobenv.AgentArgs.ProgramSum), checks the cached copy once more as it
// opens it (hashes it, or finds it as its stamp says: bincache), and runs
// every proc from that descriptor.

// shipTimeout bounds one transfer (an ssh session or an sbcast);
// shipCheckTimeout one check of the hosts (an ssh session or srun step
// that hashes what they have).
const (
	shipTimeout      = 10 * time.Minute
	shipCheckTimeout = 2 * time.Minute
)

// shipment is what a job's launcher sends: the binaries here, the path
// each runs from on a host that is not sent it, and, once shipped, the
// path each runs from on each host.
type shipment struct {
	send  hostsconfig.ShipSend
	cache string            // [ship] cache; "" for the default
	bins  []bincache.Binary // here
	paths []string          // bins[i]'s path on the hosts, unshipped
	roles []string          // "monarch" or "program", for messages
	out   io.Writer         // the launcher's progress lines
	// at[h][i] is bins[i]'s path on host h (one row for all hosts when
	// they share it: Slurm); nil before shipping, or when nothing was.
	at [][]string

	mu     sync.Mutex
	sentTo map[int][]string // bins[i] sent to these hosts
}

// newShipment hashes what cfg's job would send to its hosts; nil when
// nothing is to be sent ([ship] send = false, no remote hosts).
func newShipment(cfg *RunConfig, out io.Writer) (*shipment, error) {
	h := cfg.Hosts
	if h == nil || h.Scheduler == hostsconfig.SchedulerLocal || h.Ship.Send == hostsconfig.SendNever {
		return nil, nil
	}
	s := &shipment{send: h.Ship.Send, cache: h.Ship.Cache, out: out, sentTo: map[int][]string{}}
	keySet := h.Slurm != nil && h.Slurm.Monarch != "" || h.SSH != nil && h.SSH.Monarch != ""
	var here []string
	if !keySet || s.send == hostsconfig.SendAlways {
		s.roles, s.paths, here = append(s.roles, "monarch"), append(s.paths, cfg.Monarch), append(here, cfg.Self)
	}
	if cfg.Job.SPMD == nil && cfg.Job.Program != "" {
		s.roles, s.paths, here = append(s.roles, "program"), append(s.paths, cfg.Job.Program), append(here, cfg.Job.Program)
	}
	if len(here) == 0 {
		return nil, nil
	}
	// Hashed at once: each takes a core for a moment (34 MB: 0.2 s).
	s.bins = make([]bincache.Binary, len(here))
	errs := make([]error, len(here))
	var wg sync.WaitGroup
	for i, p := range here {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if s.bins[i], errs[i] = bincache.Open(p); errs[i] != nil {
				errs[i] = fmt.Errorf("ship the %s to the hosts: %w", s.roles[i], errs[i])
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return s, nil
}

// mode is CheckArgv's mode for [ship] send.
func (s *shipment) mode() string {
	if s.send == hostsconfig.SendAlways {
		return bincache.ModeAlways
	}
	return bincache.ModeAuto
}

// use sets what host h runs, the monarch binary and the program, to
// their cached copies there, once shipped. Nil s leaves them.
func (s *shipment) use(h int, monarch, program *string) {
	if s == nil || len(s.at) == 0 {
		return
	}
	row := s.at[min(h, len(s.at)-1)]
	for i, role := range s.roles {
		switch {
		case row == nil:
		case role == "monarch":
			*monarch = row[i]
		case role == "program":
			*program = row[i]
		}
	}
}

// programSum is the sha256 of the program sent, which the agents check it
// by; "" when none is (nil s, an [spmd] job).
func (s *shipment) programSum() string {
	if s == nil {
		return ""
	}
	for i, role := range s.roles {
		if role == "program" {
			return s.bins[i].Sum
		}
	}
	return ""
}

// named is bins[i] as messages name it: "program train (/x/train)".
func (s *shipment) named(i int) string {
	if s.roles[i] == "monarch" {
		return "monarch (" + s.bins[i].Path + ")"
	}
	return "program " + s.bins[i].Name + " (" + s.bins[i].Path + ")"
}

// sent records that bins[i] went to host.
func (s *shipment) sent(i int, host string) {
	s.mu.Lock()
	s.sentTo[i] = append(s.sentTo[i], host)
	s.mu.Unlock()
}

// say writes one of the launcher's progress lines.
func (s *shipment) say(format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fmt.Fprintf(s.out, "monarch: "+format+"\n", args...)
}

// report says what was sent, how and how long it took: one line per
// binary sent; nothing when nothing was.
func (s *shipment) report(how string, took time.Duration) {
	for i, b := range s.bins {
		hosts := s.sentTo[i]
		if len(hosts) == 0 {
			continue
		}
		slices.Sort(hosts)
		s.say("sent %s (%s, sha256 %s) to %s by %s in %v", s.named(i), sizeOf(b.Size), bincache.Short(b.Sum),
			fewNames(hosts), how, took.Round(10*time.Millisecond))
	}
}

// refused says that host refused bins[i] (what reply r says) and then
// does what then says ("sending it again"); "" says nothing. It returns
// the refusal in words.
func (s *shipment) refused(host string, i int, r bincache.Reply, then string) string {
	why := s.why(i, r)
	if then != "" {
		s.say("%s: %s: refused; %s", host, why, then)
	}
	return why
}

// sendingAgain is what follows a refusal of a cached copy, or of one that
// arrived: as refused says it.
const sendingAgain = "sending it again"

// why is what a refusal means, in words.
func (s *shipment) why(i int, r bincache.Reply) string {
	b := s.bins[i]
	got, size, _ := strings.Cut(r.Rest, " ")
	switch r.Word {
	case "bad":
		if size != "" {
			return fmt.Sprintf("%s arrived as %s bytes with sha256 %s, not %d bytes with sha256 %s",
				s.named(i), size, bincache.Short(got), b.Size, bincache.Short(b.Sum))
		}
		return fmt.Sprintf("the cached copy of %s fails its checksum (sha256 %s, not %s)", s.named(i), bincache.Short(got), bincache.Short(b.Sum))
	case "unsafe":
		return fmt.Sprintf("the cached copy of %s could have been written by another user (%s)", s.named(i), r.Rest)
	case "missing":
		return fmt.Sprintf("%s did not arrive (no %s)", s.named(i), r.Rest)
	case "fail":
		return fmt.Sprintf("could not store %s in the cache: %s", s.named(i), r.Rest)
	}
	return fmt.Sprintf("%s: %s %s", s.named(i), r.Word, r.Rest)
}

// untrusted says that host has bins[i] at its path, but where another
// user could have put it or changed it (r.Rest says how): it is sent
// rather than taken from there.
func (s *shipment) untrusted(host string, i int, r bincache.Reply) {
	s.say("%s: %s at %s there is not taken: %s; sending it", host, s.named(i), s.paths[i], r.Rest)
}

// unsafeCache is the error of a host whose cache dir another user could
// write to (why says how): nothing is sent there, nothing run from it.
func (s *shipment) unsafeCache(host, why string) error {
	cache := s.cache
	if cache == "" {
		cache = hostsconfig.DefaultShipCache
	}
	return fmt.Errorf("%s: its binary cache (%s) is refused: %s; another user could change what the job runs there: "+
		"set [ship] cache in the hosts file to a folder that only you can write (on every host)", host, cache, why)
}

// sizeOf writes a size for people: 20.1 MB.
func sizeOf(n int64) string {
	if n < 1e6 {
		return fmt.Sprintf("%.1f kB", float64(n)/1e3)
	}
	return fmt.Sprintf("%.1f MB", float64(n)/1e6)
}

// runTool runs cmd, started by internal/child (it dies with the
// launcher), until it ends, ctx ends or limit passes: then it is stopped.
// It returns what cmd wrote to stdout and stderr.
func runTool(ctx context.Context, cmd *exec.Cmd, limit time.Duration) (stdout, stderr []byte, err error) {
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	p, err := child.Start(cmd)
	if err != nil {
		return nil, nil, err
	}
	timer := time.NewTimer(limit)
	defer timer.Stop()
	select {
	case <-p.Done():
		return out.Bytes(), errb.Bytes(), p.Err()
	case <-ctx.Done():
		err = ctx.Err()
	case <-timer.C:
		err = fmt.Errorf("%s did not end within %v", filepath.Base(cmd.Path), limit)
	}
	p.Stop(time.Second)
	<-p.Done()
	return out.Bytes(), errb.Bytes(), err
}

// replies reads a host script's answers from out; other lines are not
// the script's.
func replies(out []byte) []bincache.Reply {
	var rs []bincache.Reply
	for _, l := range strings.Split(string(out), "\n") {
		if r, ok := bincache.Parse(l); ok {
			rs = append(rs, r)
		}
	}
	return rs
}

// tailOf is the last n non-empty lines of b, joined with "; ".
func tailOf(b []byte, n int) string {
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	return strings.Join(lines[max(0, len(lines)-n):], "; ")
}
