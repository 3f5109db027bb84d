package launch

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/monarch-go/monarch/hostsconfig"
	"github.com/monarch-go/monarch/internal/child"
	"github.com/monarch-go/monarch/internal/procstat"
)

// Getting an allocation: salloc runs the job's own monarch run inside
// one. A request Slurm refuses, or cannot meet within [slurm] immediate,
// is said in the hosts file's terms: the key, its value, and what the
// partition has (sinfo).

// fits checks the request against what sinfo says of its partition (nil
// parts: sinfo could not say, nothing to check): more nodes than the
// partition has can never be allocated.
func (s slurmHosts) fits(parts []partition) error {
	if s.cfg == nil || s.cfg.Nodes < 1 || parts == nil {
		return nil
	}
	part, ok := findPartition(parts, s.cfg.Partition)
	if !ok {
		return nil // an unknown partition: salloc says so, and we after it
	}
	if s.cfg.Nodes > part.nodes() {
		return fmt.Errorf("slurm: %s: %s", s.keyIs("nodes", s.cfg.Nodes), part)
	}
	return nil
}

// keyIs names a key of the [slurm] table with its value, and where the
// hosts file gives it: "[slurm] nodes = 3 in hosts.toml:3".
func (s slurmHosts) keyIs(key string, value any) string {
	v := fmt.Sprint(value)
	if s.cfg != nil && s.cfg.Flags[key] != "" {
		return fmt.Sprintf("%s %s (over [slurm] %s)", s.cfg.Flags[key], v, key)
	}
	if str, ok := value.(string); ok {
		v = strconv.Quote(str)
	}
	at := ""
	if s.file != "" {
		at = " in " + displayPath(s.file)
		if n := keyLine(s.file, "slurm", key); n > 0 {
			at += ":" + strconv.Itoa(n)
		}
	}
	return fmt.Sprintf("[slurm] %s = %s%s", key, v, at)
}

// immediateIs is keyIs for [slurm] immediate, which has a default.
func (s slurmHosts) immediateIs() string {
	d := hostsconfig.DefaultSlurmImmediate
	if s.cfg != nil && s.cfg.Immediate > 0 {
		d = s.cfg.Immediate
	}
	switch {
	case s.file != "" && keyLine(s.file, "slurm", "immediate") > 0:
		return s.keyIs("immediate", d.String())
	case d == hostsconfig.DefaultSlurmImmediate:
		return fmt.Sprintf("[slurm] immediate = %q (the default)", d.String())
	}
	return fmt.Sprintf("[slurm] immediate = %q", d.String())
}

// displayPath is path as a user would type it here: relative to the
// working directory when below it.
func displayPath(path string) string {
	wd, err := os.Getwd()
	if err != nil {
		return path
	}
	if rel, err := filepath.Rel(wd, path); err == nil && !strings.HasPrefix(rel, "..") {
		return rel
	}
	return path
}

var reTOMLTable = regexp.MustCompile(`^\s*\[\s*([^\[\]]+?)\s*\]`)

// keyLine is the line of key in table of the TOML file at path (the
// table [slurm], [hosts.slurm], or a dotted slurm.key); 0 when not found
// or unreadable. The file was decoded already: this only finds the line.
func keyLine(path, table, key string) int {
	b, err := os.ReadFile(path)
	if err != nil || len(b) > 1<<20 {
		return 0
	}
	keyRe := regexp.MustCompile(`^\s*(?:(?:hosts\.)?` + regexp.QuoteMeta(table) + `\.)?"?` + regexp.QuoteMeta(key) + `"?\s*=`)
	dotted := regexp.MustCompile(`^\s*(?:hosts\.)?` + regexp.QuoteMeta(table) + `\.`)
	current := ""
	for i, line := range strings.Split(string(b), "\n") {
		if m := reTOMLTable.FindStringSubmatch(line); m != nil {
			current = strings.ReplaceAll(m[1], `"`, "")
			continue
		}
		inTable := current == table || current == "hosts."+table
		if keyRe.MatchString(line) && (inTable || dotted.MatchString(line)) {
			return i + 1
		}
	}
	return 0
}

// salloc runs salloc with its options opts and the command `monarch
// rerun...` (this monarch: salloc runs it on this machine, where [slurm]
// monarch, the path on the nodes, may not be), and returns the command's
// exit status. The command writes to the launcher's stderr, passed to it
// as fd 3: salloc's own stderr comes here, for its errors. Its lines
// pass on but for its errors and its goodbyes ("Relinquishing job
// allocation"), which are said, translated, only when the allocation
// fails.
func (s slurmHosts) salloc(ctx context.Context, cfg *RunConfig, opts, rerun []string) (int, error) {
	errFile, done, err := fileOf(cfg.Stderr)
	if err != nil {
		return 0, fmt.Errorf("slurm: salloc: %w", err)
	}
	defer done()
	// sh runs the command with fd 3 as its stderr; exec keeps it salloc's
	// child, to which the signals are relayed.
	args := append(append(slices.Clip(opts), "/bin/sh", "-c", `exec "$@" 2>&3 3>&-`, "sh", cfg.Self), rerun...)
	cmd := exec.Command("salloc", args...)
	said := &stepLog{from: "salloc", own: sallocHeld, pass: cfg.Stderr}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, cfg.Stdout, said
	cmd.ExtraFiles = []*os.File{errFile}
	p, err := child.Start(cmd)
	if err != nil {
		return 0, fmt.Errorf("slurm: salloc: %w", err)
	}
	// salloc ends the allocation on SIGTERM and passes nothing on: the
	// signals go to the monarch run it runs.
	relay := func(sig os.Signal) {
		kids := procstat.Children(p.Pid())
		if len(kids) == 0 {
			p.Signal(sig)
		}
		for _, k := range kids {
			syscall.Kill(k, sig.(syscall.Signal))
		}
	}
	code, _, _ := superviseClient(ctx, p, stopTimes{grace: cfg.Grace + 5*time.Second, stop: cfg.Job.StopGrace, relay: relay}, nil, nil)
	said.flush()
	kept, _ := said.said()
	var lines []string
	for _, l := range kept {
		if l.own {
			lines = append(lines, l.text)
		}
	}
	if err := s.allocFailed(ctx, "salloc", lines); err != nil {
		return 1, err
	}
	return code, nil
}

// sallocHeld tells the lines of salloc that are held: its errors, said
// again under the launcher's own message if the allocation fails, and
// its goodbyes, which a job that ended well does without.
func sallocHeld(line string) bool {
	return strings.HasPrefix(line, "salloc: error: ") || strings.HasPrefix(line, "salloc: Relinquishing job allocation") ||
		(strings.HasPrefix(line, "salloc: Job allocation ") && strings.HasSuffix(line, " has been revoked."))
}

// fileOf returns w as a file to hand to a child: w itself when it is one;
// else a pipe copied to w, until done (which waits for the copy).
func fileOf(w io.Writer) (f *os.File, done func(), err error) {
	if f, ok := w.(*os.File); ok {
		return f, func() {}, nil
	}
	r, pw, err := os.Pipe()
	if err != nil {
		return nil, nil, err
	}
	copied := make(chan struct{})
	go func() {
		io.Copy(w, r)
		r.Close()
		close(copied)
	}()
	return pw, func() {
		pw.Close()
		select {
		case <-copied:
		case <-time.After(5 * time.Second): // a grandchild holds the pipe open: let it
		}
	}, nil
}

var (
	reAllocRefused = regexp.MustCompile(`^(?:salloc: error: Job submit/allocate|sbatch: error: Batch job submission) failed: (.*)$`)
	reAllocGaveUp  = regexp.MustCompile(`^salloc: error: Unable to allocate resources: (.*)$`)
	reBadPartition = regexp.MustCompile(`^(?:salloc|sbatch): error: invalid partition specified: (.*)$`)
)

// allocFailed reads salloc's or sbatch's errors (lines) for a request
// Slurm refused or could not meet in time and says it in the hosts
// file's terms, with what sinfo says now of the partition; nil when they
// tell none (the allocation was granted, or the tool failed otherwise).
// tool names it: "salloc", "sbatch".
func (s slurmHosts) allocFailed(ctx context.Context, tool string, lines []string) error {
	var why, kind string
	for _, l := range lines {
		if m := reBadPartition.FindStringSubmatch(l); m != nil {
			why, kind = m[1], "partition"
			break
		}
		if m := reAllocGaveUp.FindStringSubmatch(l); m != nil {
			why, kind = m[1], "gave up"
		}
		if m := reAllocRefused.FindStringSubmatch(l); m != nil && kind == "" {
			why, kind = m[1], "refused"
		}
	}
	if kind == "" {
		return nil
	}
	parts, err := sinfoPartitions(ctx)
	var partNote string
	part, found := findPartition(parts, s.partition())
	switch {
	case err != nil:
		partNote = "; " + err.Error()
	case found:
		partNote = "; " + part.String()
		if u := part.usable(); u < s.nodes() {
			partNote += fmt.Sprintf(": %d of them can run jobs now", u)
		}
	}
	var msg string
	switch kind {
	case "partition":
		msg = fmt.Sprintf("%s: Slurm has no such partition (invalid partition); its partitions: %s", s.keyIs("partition", s.partition()), partitionNames(parts))
	case "gave up":
		msg = fmt.Sprintf("no allocation within %s for %s (%s)%s; a longer [slurm] immediate waits longer", s.immediateIs(), s.keyIs("nodes", s.nodes()), why, partNote)
	default:
		msg = fmt.Sprintf("Slurm refused the allocation (%s): %s%s", s.keyIs("nodes", s.nodes()), why, partNote)
	}
	return fmt.Errorf("slurm: %s\n  %s said:\n    %s", msg, tool, strings.Join(lines, "\n    "))
}

// partition and nodes are the request's, "" and 0 when not given.
func (s slurmHosts) partition() string {
	if s.cfg == nil {
		return ""
	}
	return s.cfg.Partition
}

func (s slurmHosts) nodes() int {
	if s.cfg == nil {
		return 0
	}
	return s.cfg.Nodes
}
