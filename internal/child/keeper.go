package child

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// A Keeper ends the process groups of its parent's children when the
// parent dies, by any death, SIGKILL included. A child's parent-death
// signal ends the child alone: what it started in its own process group
// (a shell's sleep, a wrapper's python) would be left to init. The keeper
// is a process of its own, the parent's program run again in keeper mode
// (see keeperMain), in a process group of its own, reading the groups
// to end from a pipe whose only writer is the parent: when the parent
// dies the kernel closes that end, the keeper reads EOF, sends SIGKILL to
// every group still registered, and exits. It ends so too when the
// parent closes it (Close), at the end of the parent's work.
//
// One keeper serves every group of its parent, which is cheaper than a
// process per child and needs no change to the children: their pid,
// argv, environment, signals and exit status are what they were.
// Descendants that leave their group (setsid, a daemon's double fork) are
// not ended by it.
//
// A group's id is its leader's pid, which the kernel does not hand out
// again while any process of the group lives; once the group is empty it
// may, so the keeper forgets empty groups (checked every
// keeperPruneEvery) and the parent forgets those it sees empty (Forget).
type Keeper struct {
	mu   sync.Mutex
	w    *os.File // nil once closed
	cmd  *exec.Cmd
	done chan struct{} // closed once the keeper is reaped
}

// Keeper mode: how the program, run again, knows it is a keeper.
const (
	keeperArg0 = "monarch-keeper" // what ps shows
	keeperEnv  = "MONARCH_KEEPER"
)

// maxKept bounds the groups a keeper holds: past it, a group is refused
// (and said so on its stderr), not kept at the cost of unbounded memory.
const maxKept = 1 << 16

// keeperPruneEvery is how often a keeper forgets groups that are empty.
const keeperPruneEvery = 2 * time.Second

// StartKeeper starts a keeper for this process: this process's program
// (/proc/self/exe, which is the running program even once its file is
// replaced or removed) in keeper mode, its stderr this process's. It has
// no parent-death signal: it must outlive this process, for as long as it
// takes to end the groups.
func StartKeeper() (*Keeper, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("start keeper: %w", err)
	}
	cmd := &exec.Cmd{
		Path: "/proc/self/exe",
		Args: []string{keeperArg0},
		// GORACE: a program built with -race sleeps 1 s at exit by
		// default, which Close would wait for.
		Env:    []string{keeperEnv + "=1", "GORACE=atexit_sleep_ms=0"},
		Dir:    "/",
		Stdin:  r,
		Stderr: os.Stderr,
		// A group of its own: a signal to this process's group (a
		// terminal's Ctrl-C, a kill of the group) does not end it
		// before it has ended the others.
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true},
	}
	err = cmd.Start()
	r.Close() // the keeper has its copy: the only reader
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("start keeper (/proc/self/exe): %w", err)
	}
	k := &Keeper{w: w, cmd: cmd, done: make(chan struct{})}
	go func() { cmd.Wait(); close(k.done) }()
	return k, nil
}

// Pid is the keeper's process id.
func (k *Keeper) Pid() int { return k.cmd.Process.Pid }

// Keep registers process group pgid: the keeper ends it when this
// process dies or closes the keeper. A group id below 2 is refused.
func (k *Keeper) Keep(pgid int) error { return k.send('+', pgid) }

// Forget unregisters process group pgid, which has no process left.
func (k *Keeper) Forget(pgid int) error { return k.send('-', pgid) }

func (k *Keeper) send(op byte, pgid int) error {
	if pgid < 2 {
		return fmt.Errorf("keeper: process group %d: not a group of a child", pgid)
	}
	line := strconv.AppendInt([]byte{op}, int64(pgid), 10)
	line = append(line, '\n')
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.w == nil {
		return errors.New("keeper: closed")
	}
	if _, err := k.w.Write(line); err != nil {
		return fmt.Errorf("keeper (pid %d): %w", k.Pid(), err)
	}
	return nil
}

// Close ends the keeper as this process's death would: it ends every
// group still registered, and exits. Close waits for it, at most
// KillWait. Idempotent.
func (k *Keeper) Close() {
	k.mu.Lock()
	if k.w != nil {
		k.w.Close()
		k.w = nil
	}
	k.mu.Unlock()
	t := time.NewTimer(KillWait)
	defer t.Stop()
	select {
	case <-k.done:
	case <-t.C:
	}
}

// keptGroups is what a keeper holds: the groups to end.
type keptGroups struct {
	mu     sync.Mutex
	groups map[int]bool
}

// parseKeeperLine reads one line of the keeper's protocol, without its
// newline: "+pgid" keeps a group, "-pgid" forgets it; a pgid is a
// decimal above 1 (never 0, this process's group, nor -1, every process).
func parseKeeperLine(line []byte) (keep bool, pgid int, err error) {
	if len(line) < 2 || (line[0] != '+' && line[0] != '-') {
		return false, 0, fmt.Errorf("keeper: line %q: want +pgid or -pgid", line)
	}
	for _, c := range line[1:] {
		if c < '0' || c > '9' {
			return false, 0, fmt.Errorf("keeper: line %q: the group is not a decimal number", line)
		}
	}
	pgid, err = strconv.Atoi(string(line[1:]))
	if err != nil || pgid < 2 {
		return false, 0, fmt.Errorf("keeper: line %q: no process group %s", line, line[1:])
	}
	return line[0] == '+', pgid, nil
}

// maxKeeperLine bounds a line of the protocol: a sign and a pid.
const maxKeeperLine = 32

// read applies the lines of r until EOF (or a read error: the parent is
// gone either way); bad lines are told to warn and skipped.
func (g *keptGroups) read(r io.Reader, warn func(error)) {
	br := bufio.NewReaderSize(r, maxKeeperLine+1)
	for {
		line, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			warn(fmt.Errorf("keeper: line longer than %d bytes, skipped", maxKeeperLine))
			for errors.Is(err, bufio.ErrBufferFull) { // to its end
				_, err = br.ReadSlice('\n')
			}
			if err != nil {
				return
			}
			continue
		}
		if err != nil {
			if len(line) > 0 {
				warn(fmt.Errorf("keeper: line %q cut short by the end of its input", line))
			}
			return
		}
		keep, pgid, perr := parseKeeperLine(line[:len(line)-1])
		if perr != nil {
			warn(perr)
			continue
		}
		g.mu.Lock()
		switch {
		case !keep:
			delete(g.groups, pgid)
		case len(g.groups) >= maxKept && !g.groups[pgid]:
			warn(fmt.Errorf("keeper: already %d groups kept; group %d is not", maxKept, pgid))
		default:
			g.groups[pgid] = true
		}
		g.mu.Unlock()
	}
}

// prune forgets the groups with no process left.
func (g *keptGroups) prune() {
	g.mu.Lock()
	defer g.mu.Unlock()
	for pgid := range g.groups {
		if syscall.Kill(-pgid, 0) == syscall.ESRCH {
			delete(g.groups, pgid)
		}
	}
}

// killAll sends SIGKILL to every group kept.
func (g *keptGroups) killAll() {
	g.mu.Lock()
	defer g.mu.Unlock()
	for pgid := range g.groups {
		syscall.Kill(-pgid, syscall.SIGKILL)
	}
}

// keeperMain is a keeper's life: it keeps the groups its stdin names
// until EOF, then ends them.
func keeperMain() int {
	// Its name in top and ps -e, rather than exe (/proc/self/exe's).
	unix.Prctl(unix.PR_SET_NAME, uintptr(unsafe.Pointer(&[]byte(keeperArg0 + "\x00")[0])), 0, 0, 0)
	g := &keptGroups{groups: map[int]bool{}}
	stop := make(chan struct{})
	go func() {
		tick := time.NewTicker(keeperPruneEvery)
		defer tick.Stop()
		for {
			select {
			case <-tick.C:
				g.prune()
			case <-stop:
				return
			}
		}
	}()
	g.read(os.Stdin, func(err error) { fmt.Fprintln(os.Stderr, err) })
	close(stop)
	g.killAll()
	return 0
}

// A program that imports this package (a launcher, a host agent, the
// SDK's) runs as a keeper when StartKeeper runs it so: before its main,
// before the packages above this one are initialized.
func init() {
	if len(os.Args) == 1 && os.Args[0] == keeperArg0 && os.Getenv(keeperEnv) == "1" {
		os.Exit(keeperMain())
	}
}
