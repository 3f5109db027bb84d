package hostagent

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/monarch-go/monarch/bus"
	"github.com/monarch-go/monarch/internal/bincache"
	"github.com/monarch-go/monarch/internal/jobenv"
	"github.com/monarch-go/monarch/internal/wire"
	"github.com/monarch-go/monarch/logagg"
	"github.com/vmihailenco/msgpack/v5"
	"golang.org/x/sys/unix"
)

// readyProcMode, as testProcVar's value, makes the test binary, started
// as a proc by an agent, serve as readyProc.
const readyProcMode = "ready"

// readyProc is an SDK proc at its smallest: it dials the bus its agent
// gives it, writes "ready <its id>" on stdout, reports ready to its
// parent's port as a runtime does (actorrt's worker), and runs until
// SIGTERM.
func readyProc() int {
	env, c, err := dialAsProc()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer c.Close()
	h := wire.Header{Kind: wire.KindPort, Port: env.Proc.ReadyPort, Rank: env.Proc.ReadyRank, ReplyTo: env.Proc.ID}
	w, err := wire.NewFrame(&h, bus.DefaultMaxMessage)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println("ready", env.Proc.ID) // before the report: a proc killed once ready has written it
	w.Enc.Encode(&wire.ProcReady{PID: os.Getpid(), Host: "test"})
	err = c.Publish(jobenv.SubjectsOf(env.Job).Proc(env.Proc.Parent), w.Bytes())
	w.Free()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	if err == nil {
		err = c.Flush(ctx)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	<-ctx.Done()
	return 0
}

// procView is what the kernel says of a running process: its argv, its
// environment (as it was exec'd), the CPUs it may run on and the file it
// runs.
type procView struct {
	argv []string
	env  map[string]string
	cpus string // Cpus_allowed_list
	exe  string
}

func viewProc(t *testing.T, pid int) procView {
	t.Helper()
	dir := "/proc/" + strconv.Itoa(pid)
	cmdline, err := os.ReadFile(dir + "/cmdline")
	if err != nil {
		t.Fatal(err)
	}
	environ, err := os.ReadFile(dir + "/environ")
	if err != nil {
		t.Fatal(err)
	}
	status, err := os.ReadFile(dir + "/status")
	if err != nil {
		t.Fatal(err)
	}
	exe, err := os.Readlink(dir + "/exe")
	if err != nil {
		t.Fatal(err)
	}
	v := procView{argv: strings.Split(strings.TrimSuffix(string(cmdline), "\x00"), "\x00"), env: map[string]string{}, exe: exe}
	for _, kv := range bytes.Split(environ, []byte{0}) {
		if k, val, ok := strings.Cut(string(kv), "="); ok {
			v.env[k] = val
		}
	}
	for _, l := range strings.Split(string(status), "\n") {
		if c, ok := strings.CutPrefix(l, "Cpus_allowed_list:"); ok {
			v.cpus = strings.TrimSpace(c)
		}
	}
	return v
}

// settled waits (10s at most) until process pid runs argv0: its wrapper
// has exec'd it.
func settled(t *testing.T, pid int, argv0 string) procView {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		v := viewProc(t, pid)
		if v.argv[0] == argv0 {
			return v
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 10s, process %d still runs %q, not %s", pid, v.argv, argv0)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// lastCPU is the highest-numbered CPU this process may run on: a binding
// to it alone differs from the parent's, where there are two or more.
func lastCPU(t *testing.T) int {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		t.Fatal(err)
	}
	for c := len(set)*64 - 1; c >= 0; c-- {
		if set.IsSet(c) {
			return c
		}
	}
	t.Fatal("no CPU")
	return 0
}

// readyOn waits for the ready report on port for rank and returns it;
// an error there fails the test.
func readyOn(b *jobBus, port uint64, rank int) wire.ProcReady {
	b.t.Helper()
	b.waitFor(fmt.Sprintf("the ready report on port %d, rank %d", port, rank), func() bool { return b.reply(port, rank) != nil })
	b.mu.Lock()
	f := *b.reply(port, rank)
	b.mu.Unlock()
	if f.Flags&wire.FlagError != 0 {
		var r wire.ErrorReply
		msgpack.Unmarshal(f.Payload, &r)
		b.t.Fatalf("port %d, rank %d: an error: %+v", port, rank, r)
	}
	var rd wire.ProcReady
	if err := msgpack.Unmarshal(f.Payload, &rd); err != nil || rd.PID <= 0 {
		b.t.Fatalf("port %d, rank %d: ready report %+v (%v)", port, rank, rd, err)
	}
	return rd
}

// refusalOn waits for the error on port for rank 0 and returns it.
func refusalOn(b *jobBus, port uint64) wire.ErrorReply {
	b.t.Helper()
	b.waitFor(fmt.Sprintf("the answer on port %d", port), func() bool { return b.reply(port, 0) != nil })
	b.mu.Lock()
	f := *b.reply(port, 0)
	b.mu.Unlock()
	var r wire.ErrorReply
	if err := msgpack.Unmarshal(f.Payload, &r); err != nil || f.Flags&wire.FlagError == 0 {
		b.t.Fatalf("port %d: answered with %+v, not an error (%v)", port, f.Header, err)
	}
	return r
}

// killAndWait kills a proc with SIGKILL and waits (10s at most) until its
// agent tells its end.
func killAndWait(t *testing.T, ended <-chan wire.GoneNotice, id string, pid int) {
	t.Helper()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	deadline := time.After(10 * time.Second)
	for {
		select {
		case n := <-ended:
			if n.Proc != id {
				continue
			}
			if n.Stopped || !strings.Contains(n.Reason, "SIGKILL") {
				t.Errorf("the end of %s told as %+v", id, n)
			}
			return
		case <-deadline:
			t.Fatalf("the end of %s was not told within 10s", id)
		}
	}
}

// TestRespawnProc: an SDK proc started under a wrapper, with its own
// variables and bound to a CPU, killed, is started again under a new id
// exactly as it was: the same argv, wrapper, environment (but for its id
// and ready port) and CPUs, in the same proc mesh at the same rank; it
// reports ready to the respawn's port with rank 0.
func TestRespawnProc(t *testing.T) {
	b := newJobBus(t, "j1")
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	envProg, err := exec.LookPath("env")
	if err != nil {
		t.Skip("no env(1) to wrap procs with")
	}
	ended := make(chan wire.GoneNotice, 8)
	cfg := Config{ID: "c", Job: "j1", Host: "h0", Program: exe, Args: []string{"-test.run=^$", "two words"},
		Env: []string{testProcVar + "=" + readyProcMode}, Bus: jobenv.Bus{URL: b.srv.URL(), Token: b.srv.Token()},
		StopTimeout: 300 * time.Millisecond, OnEnd: func(n wire.GoneNotice) { ended <- n }}
	a := New(cfg, b.conn)
	defer a.Close()
	cpu := lastCPU(t)
	a.SpawnProcs(wire.SpawnProcsReq{IDs: []string{"c-1"}, Ranks: []int{3}, Env: [][]string{{"EXTRA=kept"}}, Proc: "c", Port: 7,
		Wrap: [][]string{{envProg, "WRAPPED=yes"}}, CPUs: [][]int{{cpu}}, Mesh: "trainers"})
	pid := readyOn(b, 7, 3).PID
	old := viewProc(t, pid)
	// The wrapper runs the program from the descriptor the agent checked
	// (see program.go).
	if want := append([]string{bincache.ExecPath(programFD)}, cfg.Args...); !slices.Equal(old.argv, want) || old.exe != exe ||
		old.env["WRAPPED"] != "yes" || old.env["EXTRA"] != "kept" || old.cpus != strconv.Itoa(cpu) || old.env["MONARCH_PROC"] != "c-1" {
		t.Fatalf("the proc as spawned: argv %q, exe %s, WRAPPED=%q EXTRA=%q MONARCH_PROC=%q, cpus %s", old.argv, old.exe, old.env["WRAPPED"], old.env["EXTRA"],
			old.env["MONARCH_PROC"], old.cpus)
	}
	killAndWait(t, ended, "c-1", pid)

	go a.RespawnProc(wire.RespawnProcReq{Old: "c-1", New: "c-7", Proc: "c", Port: 9})
	rd := readyOn(b, 9, 0)
	if rd.PID == pid {
		t.Fatalf("the new proc has the old one's pid %d", pid)
	}
	now := viewProc(t, rd.PID)
	if !slices.Equal(now.argv, old.argv) || now.exe != old.exe {
		t.Errorf("argv %q, exe %s; was %q, %s", now.argv, now.exe, old.argv, old.exe)
	}
	if now.cpus != old.cpus {
		t.Errorf("cpus %s, was %s", now.cpus, old.cpus)
	}
	// The same environment (the wrapper's, the agent's, the proc's own
	// and the job's) but for who it is and where it reports ready.
	differ := map[string]string{"MONARCH_PROC": "c-7", "MONARCH_READY_PORT": "9", "MONARCH_READY_RANK": "0", "MONARCH_PARENT": "c"}
	for k, v := range old.env {
		if want, ok := differ[k]; ok {
			if now.env[k] != want {
				t.Errorf("%s=%q, want %q", k, now.env[k], want)
			}
		} else if nv, ok := now.env[k]; !ok || nv != v {
			t.Errorf("%s=%q, was %q", k, nv, v)
		}
	}
	for k := range now.env {
		if _, ok := old.env[k]; !ok {
			t.Errorf("%s=%q, which the old proc had not", k, now.env[k])
		}
	}
	if old.env["MONARCH_READY_RANK"] != "3" || old.env["MONARCH_READY_PORT"] != "7" {
		t.Errorf("the old proc reported ready to port %s, rank %s", old.env["MONARCH_READY_PORT"], old.env["MONARCH_READY_RANK"])
	}
	// Its lines carry its proc mesh and rank, as the old one's did.
	b.waitFor("both procs' lines", func() bool {
		n := 0
		for _, l := range b.lines {
			if l.Stream == logagg.Stdout && strings.HasPrefix(l.Text, "ready ") {
				n++
			}
		}
		return n == 2
	})
	b.mu.Lock()
	for _, l := range b.lines {
		if l.Stream == logagg.Stdout && l.Text != "ready "+l.Proc || l.Mesh != "trainers" || l.Rank != 3 {
			t.Errorf("line %+v: want \"ready <proc>\" of mesh trainers, rank 3", l)
		}
	}
	b.mu.Unlock()
	// A stop of the old proc (the proc mesh its spawner holds names it)
	// stops the one in its place.
	a.StopProcs(wire.StopProcsReq{IDs: []string{"c-1"}}, "c", 11)
	select {
	case n := <-ended:
		if n.Proc != "c-7" || !n.Stopped {
			t.Fatalf("after a stop of c-1: %+v, want c-7 stopped", n)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("a stop of c-1 did not stop c-7, in its place, within 20s")
	}
}

// TestRespawnCommand: a command proc (SPMD) is started again as it was,
// reported ready by the agent; a respawn is refused, with an error for
// rank 0 naming the host and the procs, when the old proc is unknown,
// still running, or respawned already by a proc that ended too, or the
// new id is taken (a running
// proc, an ended one, the old one itself); a proc that took another's
// place can in turn be respawned. A respawn of a proc replaced already,
// its successor running, answers with the successor's ready report.
func TestRespawnCommand(t *testing.T) {
	b := newJobBus(t, "j1")
	envProg, err := exec.LookPath("env")
	if err != nil {
		t.Skip("no env(1) to wrap procs with")
	}
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Skip("no sleep(1)")
	}
	ended := make(chan wire.GoneNotice, 8)
	cfg := shell("")
	cfg.OnEnd = func(n wire.GoneNotice) { ended <- n }
	a := New(cfg, b.conn)
	defer a.Close()
	cpu := lastCPU(t)
	a.SpawnProcs(wire.SpawnProcsReq{IDs: []string{"c-1", "c-3"}, Ranks: []int{0, 1}, Env: [][]string{{"EXTRA=one"}, {"EXTRA=three"}}, Proc: "c", Port: 7,
		Command: []string{sleep, "60"}, Wrap: [][]string{{envProg, "WRAPPED=yes"}, nil}, CPUs: [][]int{{cpu}, nil}})
	pid1 := readyOn(b, 7, 0).PID
	readyOn(b, 7, 1)
	old := settled(t, pid1, sleep)
	if old.env["WRAPPED"] != "yes" || old.env["EXTRA"] != "one" || old.cpus != strconv.Itoa(cpu) || old.env["MONARCH_PROC"] != "" {
		t.Fatalf("the command as spawned: WRAPPED=%q EXTRA=%q MONARCH_PROC=%q, cpus %s", old.env["WRAPPED"], old.env["EXTRA"], old.env["MONARCH_PROC"], old.cpus)
	}
	killAndWait(t, ended, "c-1", pid1)

	port := uint64(100)
	refused := func(req wire.RespawnProcReq, want string) {
		t.Helper()
		port++
		req.Proc, req.Port = "c", port
		a.RespawnProc(req)
		r := refusalOn(b, port)
		if !strings.Contains(r.Message, want) || !strings.Contains(r.Message, fmt.Sprintf("respawn proc %s as %s on h0: ", req.Old, req.New)) {
			t.Errorf("respawn of %s as %s refused with %q, want %q", req.Old, req.New, r.Message, want)
		}
	}
	refused(wire.RespawnProcReq{Old: "c-1", New: "c-3"}, "proc c-3 is a proc of this agent already")
	refused(wire.RespawnProcReq{Old: "c-1", New: "c-1"}, "a proc cannot take its own place")
	refused(wire.RespawnProcReq{Old: "c-3", New: "c-5"}, "proc c-3 is still running")
	refused(wire.RespawnProcReq{Old: "c-404", New: "c-5"}, "proc c-404 is not a proc this agent started")

	// The refusals left c-1 as it was.
	a.RespawnProc(wire.RespawnProcReq{Old: "c-1", New: "c-2", Proc: "c", Port: 9})
	pid2 := readyOn(b, 9, 0).PID
	now := settled(t, pid2, sleep)
	if d := envDiff(now.env, old.env); !slices.Equal(now.argv, old.argv) || d != nil || now.cpus != old.cpus {
		t.Errorf("respawned as argv %q, cpus %s, env differing in %q; was %q, %s", now.argv, now.cpus, d, old.argv, old.cpus)
	}
	// A second respawn of c-1 (another mesh's owner asking) meets its
	// successor: c-2's ready report, and nothing is started.
	a.RespawnProc(wire.RespawnProcReq{Old: "c-1", New: "c-6", Proc: "c", Port: 11})
	if rd := readyOn(b, 11, 0); rd.Proc != "c-2" || rd.PID != pid2 {
		t.Errorf("a second respawn of c-1 answered %+v; want c-2's ready report (pid %d)", rd, pid2)
	}
	refused(wire.RespawnProcReq{Old: "c-2", New: "c-6"}, "proc c-2 is still running")

	// An ended proc's id is taken too; the new proc, once ended, can be
	// respawned in turn.
	killAndWait(t, ended, "c-2", pid2)
	refused(wire.RespawnProcReq{Old: "c-1", New: "c-7"}, "proc c-1 was respawned already, as c-2, which ended")
	refused(wire.RespawnProcReq{Old: "c-2", New: "c-1"}, "proc c-1 is a proc of this agent already")
	a.RespawnProc(wire.RespawnProcReq{Old: "c-2", New: "c-4", Proc: "c", Port: 10})
	again := settled(t, readyOn(b, 10, 0).PID, sleep)
	if d := envDiff(again.env, old.env); !slices.Equal(again.argv, old.argv) || d != nil || again.cpus != old.cpus {
		t.Errorf("respawned twice as argv %q, cpus %s, env differing in %q; was %q, %s", again.argv, again.cpus, d, old.argv, old.cpus)
	}
}

// envDiff is the variables two environments do not have alike, as
// "NAME=a|b" (nil when none).
func envDiff(a, b map[string]string) []string {
	var d []string
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			d = append(d, k+"="+v+"|"+w)
		}
	}
	for k, w := range b {
		if _, ok := a[k]; !ok {
			d = append(d, k+"=|"+w)
		}
	}
	slices.Sort(d)
	return d
}

// TestRespawnStartFails: a respawn whose program cannot start is an
// error for rank 0 (ErrProcFailed, naming the host); the old proc keeps
// no successor, and a later respawn starts it.
func TestRespawnStartFails(t *testing.T) {
	b := newJobBus(t, "j1")
	dir := t.TempDir()
	prog := filepath.Join(dir, "prog")
	if err := os.WriteFile(prog, []byte("#!/bin/sh\nexec sleep 60\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	ended := make(chan wire.GoneNotice, 4)
	cfg := shell("")
	cfg.OnEnd = func(n wire.GoneNotice) { ended <- n }
	a := New(cfg, b.conn)
	defer a.Close()
	a.SpawnProcs(wire.SpawnProcsReq{IDs: []string{"c-1"}, Ranks: []int{2}, Env: [][]string{nil}, Proc: "c", Port: 7, Command: []string{prog}})
	killAndWait(t, ended, "c-1", readyOn(b, 7, 2).PID)

	if err := os.Rename(prog, prog+".away"); err != nil {
		t.Fatal(err)
	}
	a.RespawnProc(wire.RespawnProcReq{Old: "c-1", New: "c-2", Proc: "c", Port: 9})
	r := refusalOn(b, 9)
	if r.Sentinel != wire.ErrProcFailed.Error() || !strings.Contains(r.Message, "respawn proc c-1 as c-2: ") ||
		!strings.Contains(r.Message, "start proc c-2 ("+prog+") on h0") {
		t.Errorf("a respawn that cannot start answered %+v", r)
	}
	if err := os.Rename(prog+".away", prog); err != nil {
		t.Fatal(err)
	}
	a.RespawnProc(wire.RespawnProcReq{Old: "c-1", New: "c-2", Proc: "c", Port: 10})
	readyOn(b, 10, 0)
}

// TestRespawnBounded: the agent keeps the starts of its last
// maxRespawnable ended procs, and of a respawned one only its successor's
// id; an older one is refused, saying why.
func TestRespawnBounded(t *testing.T) {
	b := newJobBus(t, "j1")
	a := New(shell(""), b.conn)
	defer a.Close()
	boot := &bootstrap{argv: []string{"/bin/true"}}
	for i := range maxRespawnable + 10 {
		p := &proc{id: "c-" + strconv.Itoa(i), boot: boot}
		a.mu.Lock()
		a.ended[p.id] = wire.GoneNotice{Proc: p.id}
		a.keepBootstrap(p)
		a.mu.Unlock()
	}
	if n := len(a.respawnable); n != maxRespawnable || len(a.respawnOrder) != maxRespawnable {
		t.Fatalf("%d ends kept (%d in order), want %d", n, len(a.respawnOrder), maxRespawnable)
	}
	a.RespawnProc(wire.RespawnProcReq{Old: "c-3", New: "c-x", Proc: "c", Port: 9})
	if r := refusalOn(b, 9); !strings.Contains(r.Message, fmt.Sprintf("proc c-3 ended before the last %d ends", maxRespawnable)) {
		t.Errorf("a respawn of a proc ended long ago: %+v", r)
	}
	// A claimed entry keeps no bootstrap.
	last := "c-" + strconv.Itoa(maxRespawnable+9)
	got, _, _, err := a.claim(wire.RespawnProcReq{Old: last, New: "c-y"})
	if err != nil || got != boot {
		t.Fatalf("claim: %v", err)
	}
	if r := a.respawnable[last]; r.boot != nil || r.successor != "c-y" {
		t.Errorf("a respawned proc's entry: %+v", r)
	}
}
