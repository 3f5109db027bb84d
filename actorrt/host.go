package actorrt

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// hostAgent starts and watches the procs of this host. In this process it
// serves ThisHost(); every proc it starts is this same binary in worker
// mode.
type hostAgent struct {
	rt     *runtimeT
	starts chan startReq

	mu       sync.Mutex
	children map[string]*child
}

type child struct {
	id     string
	cmd    *exec.Cmd
	exited chan struct{} // closed when the process has been reaped
	status error         // cmd.Wait's result, set before exited is closed
}

type startReq struct {
	cmd  *exec.Cmd
	done chan error
}

func newHostAgent(rt *runtimeT) *hostAgent {
	h := &hostAgent{rt: rt, starts: make(chan startReq), children: map[string]*child{}}
	go h.starter()
	return h
}

// starter starts every child from one OS thread that lives as long as the
// process. Linux sends a child's Pdeathsig when the thread that forked it
// exits, not the process (golang/go#27505); a goroutine that never unlocks
// its thread keeps that thread, so children die with this process and not
// earlier.
func (h *hostAgent) starter() {
	runtime.LockOSThread()
	for r := range h.starts {
		r.done <- r.cmd.Start()
	}
}

// spawn starts one proc per point of ext and waits until every one serves.
// On any failure it kills those it started and returns the error.
func (h *hostAgent) spawn(ext Extent) ([]procInfo, error) {
	rt := h.rt
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("actorrt: SpawnProcs: find this program: %w", err)
	}
	fut := newFuture[ValueMesh[procReady]](label{mesh: "procs " + ext.String()})
	port, err := rt.ports.open(newCallPort[procReady](fut, ext))
	if err != nil {
		return nil, err
	}
	defer rt.ports.close(port)
	n := ext.NumRanks()
	kids := make([]*child, 0, n)
	fail := func(err error) ([]procInfo, error) {
		h.kill(kids)
		return nil, err
	}
	for r := 0; r < n; r++ {
		id := rt.newProcID()
		cmd := exec.Command(exe, os.Args[1:]...)
		cmd.Env = append(cleanEnv(os.Environ()),
			envJob+"="+rt.job,
			envProc+"="+id,
			envBusURL+"="+rt.busURL,
			envBusToken+"="+rt.token,
			envParent+"="+rt.procID,
			envReadyPort+"="+strconv.FormatUint(port, 10),
			envReadyRank+"="+strconv.Itoa(r),
		)
		cmd.Env = append(cmd.Env, rankEnv(ext.point(r))...)
		cmd.Stdin = nil
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		// Own process group: a terminal's Ctrl-C reaches the client only,
		// which then stops the procs in order.
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
		done := make(chan error, 1)
		h.starts <- startReq{cmd, done}
		if err := <-done; err != nil {
			return fail(fmt.Errorf("actorrt: SpawnProcs: start %s: %w", exe, err))
		}
		c := &child{id: id, cmd: cmd, exited: make(chan struct{})}
		kids = append(kids, c)
		h.mu.Lock()
		h.children[id] = c
		h.mu.Unlock()
		go h.watch(c, func(status error) {
			// Exiting before it was ready fails the whole spawn at once.
			fut.resolve(ValueMesh[procReady]{}, fmt.Errorf("%w: proc %s exited before it was ready: %v", ErrProcFailed, id, status))
		})
	}
	ctx, cancel := context.WithTimeout(rt.ctx, rt.opts.spawnTimeout)
	defer cancel()
	ready, err := fut.Get(ctx)
	if err != nil {
		return fail(fmt.Errorf("actorrt: SpawnProcs %v: %w", ext, err))
	}
	infos := make([]procInfo, n)
	for r, rd := range ready.Values() {
		infos[r] = procInfo{ID: kids[r].id, Host: rd.Host, PID: rd.PID}
	}
	return infos, nil
}

// watch reaps a child and reports how it ended.
func (h *hostAgent) watch(c *child, early func(error)) {
	err := c.cmd.Wait()
	if err == nil {
		err = errors.New("exit status 0")
	}
	c.status = err
	close(c.exited)
	h.mu.Lock()
	delete(h.children, c.id)
	h.mu.Unlock()
	early(err)
	h.rt.procExited(c.id, err)
}

// kill ends children at once and waits (bounded) for them to be reaped.
func (h *hostAgent) kill(kids []*child) {
	for _, c := range kids {
		syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL)
	}
	deadline := time.After(5 * time.Second)
	for _, c := range kids {
		select {
		case <-c.exited:
		case <-deadline:
			return
		}
	}
}

// stopAll asks every child to exit, waits up to grace, then kills the rest.
func (h *hostAgent) stopAll(grace time.Duration) {
	h.mu.Lock()
	kids := make([]*child, 0, len(h.children))
	for _, c := range h.children {
		kids = append(kids, c)
	}
	h.mu.Unlock()
	h.stop(kids, grace)
}

// stopProcs stops the given children of this host; it returns the ids
// that are not (or no longer) children here.
func (h *hostAgent) stopProcs(ids []string, grace time.Duration) []string {
	var kids []*child
	var unknown []string
	h.mu.Lock()
	for _, id := range ids {
		if c := h.children[id]; c != nil {
			kids = append(kids, c)
		} else {
			unknown = append(unknown, id)
		}
	}
	h.mu.Unlock()
	h.stop(kids, grace)
	return unknown
}

func (h *hostAgent) stop(kids []*child, grace time.Duration) {
	for _, c := range kids {
		h.rt.sendControl(c.id, opExit, 0, nil)
	}
	h.rt.conn.Flush(context.Background())
	deadline := time.After(grace)
	for _, c := range kids {
		select {
		case <-c.exited:
		case <-deadline:
		}
	}
	h.kill(kids)
}

// cleanEnv drops the bootstrap variables of this process's own job, so a
// proc started from a proc gets only its own.
func cleanEnv(env []string) []string {
	out := env[:0:0]
	for _, kv := range env {
		if strings.HasPrefix(kv, "MONARCH_") && isBootstrapVar(kv) {
			continue
		}
		out = append(out, kv)
	}
	return out
}

func isBootstrapVar(kv string) bool {
	for _, k := range []string{envJob, envProc, envBusURL, envBusToken, envParent, envReadyPort, envReadyRank} {
		if strings.HasPrefix(kv, k+"=") {
			return true
		}
	}
	return strings.HasPrefix(kv, "MONARCH_RANK_") || strings.HasPrefix(kv, "MONARCH_SIZE_")
}

// rankEnv tells a proc where it is: MONARCH_RANK_<DIM> and
// MONARCH_SIZE_<DIM> for each dimension of its mesh.
func rankEnv(p Point) []string {
	var env []string
	for i, d := range p.ext.dims {
		name := strings.ToUpper(strings.ReplaceAll(d.Name, "-", "_"))
		env = append(env, "MONARCH_RANK_"+name+"="+strconv.Itoa(p.coords[i]), "MONARCH_SIZE_"+name+"="+strconv.Itoa(d.Size))
	}
	return env
}

// procExited is told of every child's end. Supervision of running procs
// builds on it.
func (rt *runtimeT) procExited(id string, status error) {
	if rt.closing.Load() {
		return // shutting down: expected
	}
	rt.log.Warn().Str("proc", id).Err(status).Msg("proc exited")
}
