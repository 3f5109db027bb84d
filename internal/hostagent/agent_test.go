package hostagent

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/monarch-go/monarch/bus"
	"github.com/monarch-go/monarch/internal/child"
	"github.com/monarch-go/monarch/internal/jobenv"
	"github.com/monarch-go/monarch/internal/testcluster"
	"github.com/monarch-go/monarch/internal/testenv"
	"github.com/monarch-go/monarch/internal/wire"
	"github.com/monarch-go/monarch/logagg"
	"github.com/vmihailenco/msgpack/v5"
)

// jobBus is a real bus for one test, with a connection that plays the
// rest of the job: it records what the agent publishes.
type jobBus struct {
	t    *testing.T
	srv  *bus.Server
	conn *bus.Conn // the agent's link
	peer *bus.Conn // the rest of the job
	subj jobenv.Subjects

	mu    sync.Mutex
	lines []logagg.Line
	msgs  []wire.Frame // frames to the client's inbox and the deaths subject
	subjs []string
	wake  chan struct{}
}

func newJobBus(t *testing.T, job string) *jobBus {
	t.Helper()
	srv, err := bus.StartServer(bus.ServerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	conn, err := bus.ConnectInProcess(srv, bus.ConnOptions{Name: "agent"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Close)
	peer, err := bus.ConnectInProcess(srv, bus.ConnOptions{Name: "peer"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(peer.Close)
	b := &jobBus{t: t, srv: srv, conn: conn, peer: peer, subj: jobenv.SubjectsOf(job), wake: make(chan struct{}, 1)}
	for _, s := range []string{b.subj.Log(), b.subj.Proc(jobenv.ClientID), b.subj.DeathsPrefix() + "*", b.subj.HeartbeatPrefix() + "*"} {
		if _, err := peer.Subscribe(s); err != nil {
			t.Fatal(err)
		}
	}
	if err := peer.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go peer.Run(ctx, func(m bus.Message) {
		b.mu.Lock()
		defer b.mu.Unlock()
		if m.Subject == b.subj.Log() {
			l, err := logagg.ParseLine(m.Data)
			if err != nil {
				t.Errorf("a log line that does not parse: %v", err)
			}
			b.lines = append(b.lines, l)
		} else {
			f, err := wire.Parse(append([]byte(nil), m.Data...))
			if err != nil {
				t.Errorf("a frame that does not parse on %s: %v", m.Subject, err)
			}
			b.msgs = append(b.msgs, f)
			b.subjs = append(b.subjs, m.Subject)
		}
		select {
		case b.wake <- struct{}{}:
		default:
		}
	})
	return b
}

// waitFor waits (10s at most) until cond holds of what arrived.
func (b *jobBus) waitFor(what string, cond func() bool) {
	b.t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		b.mu.Lock()
		ok := cond()
		b.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-b.wake:
		case <-deadline:
			b.t.Fatalf("after 10s, still waiting for %s", what)
		}
	}
}

// reply finds the port message for port and rank.
func (b *jobBus) reply(port uint64, rank int) *wire.Frame {
	for i := range b.msgs {
		if f := &b.msgs[i]; f.Kind == wire.KindPort && f.Port == port && f.Rank == rank {
			return f
		}
	}
	return nil
}

// refusal waits for an error on port for rank, and returns it.
func (b *jobBus) refusal(port uint64, rank int) wire.ErrorReply {
	b.t.Helper()
	b.waitFor("the refusal", func() bool { return b.reply(port, rank) != nil })
	b.mu.Lock()
	f := b.reply(port, rank)
	b.mu.Unlock()
	var r wire.ErrorReply
	if err := msgpack.Unmarshal(f.Payload, &r); err != nil || f.Flags&wire.FlagError == 0 {
		b.t.Fatalf("reply %+v (%v)", f.Header, err)
	}
	return r
}

func shell(script string) Config {
	return Config{ID: "c", Job: "j1", Host: "h0", Program: "/bin/sh", Args: []string{"-c", script}, StopTimeout: 300 * time.Millisecond}
}

// TestEmbedded: an agent as a runtime embeds it: procs started, their
// lines sent with their rank and host, their ends told once the lines are
// out, and a stop answered on its port and told as a stop.
func TestEmbedded(t *testing.T) {
	b := newJobBus(t, "j1")
	ended := make(chan wire.GoneNotice, 4)
	cfg := shell(`test -n "$HOLD" && exec sleep 60; echo "out $RANK_HINT"; echo err >&2; test -n "$MONARCH_PROC" || exit 9; exit 3`)
	cfg.OnEnd = func(n wire.GoneNotice) { ended <- n }
	cfg.Env = []string{"RANK_HINT=hinted"}
	a := New(cfg, b.conn)
	defer a.Close()
	before := time.Now()

	a.SpawnProcs(wire.SpawnProcsReq{IDs: []string{"c-1"}, Ranks: []int{5}, Env: [][]string{{"EXTRA=1"}}, Proc: "c", Port: 7})
	if !a.Started() {
		t.Error("an agent that started a proc says it has not")
	}
	var n wire.GoneNotice
	select {
	case n = <-ended:
	case <-time.After(10 * time.Second):
		t.Fatal("the proc's end was not told within 10s")
	}
	if n.Proc != "c-1" || n.Reason != "exited with status 3 (host h0)" || n.Stopped {
		t.Errorf("end told as %+v", n)
	}
	// It says when the proc ended, by this host's clock.
	if at := time.Unix(0, n.At); n.At == 0 || at.Before(before) || at.After(time.Now()) {
		t.Errorf("end told at %v, want a time since %v", at, before)
	}
	// The lines were sent before the end was told; its last error is
	// when its stderr line was read.
	b.waitFor("both lines", func() bool { return len(b.lines) == 2 })
	for _, l := range b.lines {
		// Read before or after the reap: the proc exits as it writes.
		if l.Stream == logagg.Stderr && min(l.Time.UnixNano(), n.At) != n.ErrAt {
			t.Errorf("its last error told at %d, want %d, when its stderr line was read, or its end", n.ErrAt, l.Time.UnixNano())
		}
		if l.Proc != "c-1" || l.Rank != 5 || l.Host != "h0" {
			t.Errorf("line %+v: want proc c-1, rank 5, host h0", l)
		}
		switch l.Stream {
		case logagg.Stdout:
			if l.Text != "out hinted" {
				t.Errorf("stdout line %q", l.Text)
			}
		case logagg.Stderr:
			if l.Text != "err" {
				t.Errorf("stderr line %q", l.Text)
			}
		}
	}

	// A stop is answered, and the end is a stop, not a failure.
	a.SpawnProcs(wire.SpawnProcsReq{IDs: []string{"c-2"}, Ranks: []int{0}, Env: [][]string{{"HOLD=1"}}, Proc: "c", Port: 7})
	a.StopProcs(wire.StopProcsReq{IDs: []string{"c-2", "c-gone"}, Rank: 4}, "c", 8)
	select {
	case n = <-ended:
	case <-time.After(10 * time.Second):
		t.Fatal("the stopped proc's end was not told within 10s")
	}
	if n.Proc != "c-2" || !n.Stopped || n.ErrAt != 0 {
		t.Errorf("stop told as %+v, want a stop with no error written", n)
	}
	b.waitFor("the stop's answer", func() bool { return b.reply(8, 4) != nil })
	if f := b.reply(8, 4); f.Flags&wire.FlagError != 0 || f.ReplyTo != "c" {
		t.Errorf("stop answered with %+v", f.Header)
	}
}

// TestStopAfterItsOwnEnd: a stop that comes once a proc has ended on its
// own, while its output is still draining (a grandchild holds its stderr
// open), does not make its end a stop: it failed, and is told so.
func TestStopAfterItsOwnEnd(t *testing.T) {
	b := newJobBus(t, "j1")
	ended := make(chan wire.GoneNotice, 1)
	cfg := shell(`sleep 1 >&2 & echo failing >&2; exit 4`)
	cfg.OnEnd = func(n wire.GoneNotice) { ended <- n }
	a := New(cfg, b.conn)
	defer a.Close()
	a.SpawnProcs(wire.SpawnProcsReq{IDs: []string{"c-1"}, Ranks: []int{0}, Env: [][]string{nil}, Proc: "c", Port: 7})
	waitReaped(t, a, "c-1")
	a.StopProcs(wire.StopProcsReq{IDs: []string{"c-1"}}, "c", 8)
	select {
	case n := <-ended:
		if n.Stopped || n.Status != 4 || n.Reason != "exited with status 4 (host h0)" {
			t.Errorf("end told as %+v, want a failure with status 4, not a stop", n)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the end was not told within 10s")
	}
	b.waitFor("the stop's answer", func() bool { return b.reply(8, 0) != nil })
}

// waitReaped waits (10s at most) until the agent has reaped proc id while
// its output still drains (a grandchild holds its pipes): still its child.
func waitReaped(t *testing.T, a *Agent, id string) {
	t.Helper()
	reaped := func() bool {
		a.mu.Lock()
		defer a.mu.Unlock()
		p := a.children[id]
		return p != nil && p.process.Exited()
	}
	for deadline := time.Now().Add(10 * time.Second); !reaped(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("proc %s was not reaped (and still draining) within 10s", id)
		}
	}
}

// TestLastErrorTime: an end notice's ErrAt is when the proc's last
// stderr line was read; one read after the proc was reaped (a
// grandchild's, written after the end) is not placed after the end: the
// notice's ErrAt is then its At.
func TestLastErrorTime(t *testing.T) {
	b := newJobBus(t, "j1")
	// Each proc waits on its fifo until the test lets it go on.
	dir := t.TempDir()
	release := func(fifo string) {
		// Read-write: it opens whether or not anyone reads yet.
		if f, err := os.OpenFile(fifo, os.O_RDWR, 0); err == nil {
			f.WriteString("go\n")
			f.Close()
		}
	}
	fifos := make([]string, 2)
	for i := range fifos {
		fifos[i] = filepath.Join(dir, fmt.Sprint(i))
		if err := syscall.Mkfifo(fifos[i], 0o600); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { release(fifos[i]) }) // nothing outlives the test
	}
	ended := make(chan wire.GoneNotice, 2)
	// It holds its fifo open (fd 3, and its grandchild too): what the
	// test writes waits there until read.
	cfg := shell(`exec 3<>"$FIFO"; echo "early $LATE" >&2; read x <&3; test -z "$LATE" || (read x <&3; echo late >&2) & exit 5`)
	cfg.OnEnd = func(n wire.GoneNotice) { ended <- n }
	a := New(cfg, b.conn)
	defer a.Close()
	end := func() wire.GoneNotice {
		select {
		case n := <-ended:
			return n
		case <-time.After(10 * time.Second):
			t.Fatal("the end was not told within 10s")
		}
		return wire.GoneNotice{}
	}

	// Its error read, then its end: ErrAt is when the line was read.
	a.SpawnProcs(wire.SpawnProcsReq{IDs: []string{"c-1"}, Ranks: []int{0}, Env: [][]string{{"FIFO=" + fifos[0]}}, Proc: "c", Port: 7})
	b.waitFor("its error", func() bool { return len(b.lines) == 1 })
	release(fifos[0])
	if n, early := end(), b.lines[0]; n.ErrAt != early.Time.UnixNano() || n.ErrAt >= n.At || n.Status != 5 {
		t.Errorf("end told as %+v, want its last error when %q was read (%d)", n, early.Text, early.Time.UnixNano())
	}

	// A line read after its end: ErrAt is its end.
	a.SpawnProcs(wire.SpawnProcsReq{IDs: []string{"c-2"}, Ranks: []int{0}, Env: [][]string{{"FIFO=" + fifos[1], "LATE=1"}}, Proc: "c", Port: 7})
	b.waitFor("its first error", func() bool { return len(b.lines) == 2 })
	release(fifos[1])
	waitReaped(t, a, "c-2")
	release(fifos[1])
	n := end()
	b.waitFor("the late line", func() bool { return len(b.lines) == 3 })
	if late := b.lines[2]; late.Text != "late" || late.Time.UnixNano() <= n.At {
		t.Fatalf("line %+v, want the grandchild's, read after the end at %d", late, n.At)
	}
	if n.ErrAt != n.At || n.Status != 5 {
		t.Errorf("end told as %+v, want its last error at its end", n)
	}
}

// TestStopKillsAfterTheTimeout: a proc that ignores SIGTERM is killed.
func TestStopKillsAfterTheTimeout(t *testing.T) {
	b := newJobBus(t, "j1")
	ended := make(chan wire.GoneNotice, 1)
	cfg := shell(`trap '' TERM; sleep 60 & wait`)
	cfg.OnEnd = func(n wire.GoneNotice) { ended <- n }
	a := New(cfg, b.conn)
	defer a.Close()
	a.SpawnProcs(wire.SpawnProcsReq{IDs: []string{"c-1"}, Ranks: []int{0}, Env: [][]string{nil}, Proc: "c", Port: 7})
	time.Sleep(200 * time.Millisecond) // let the shell set its trap
	start := time.Now()
	a.StopProcs(wire.StopProcsReq{IDs: []string{"c-1"}}, "c", 8)
	n := <-ended
	if n.Reason != "killed by SIGKILL (host h0)" || !n.Stopped {
		t.Errorf("end told as %+v", n)
	}
	if d := time.Since(start); d < cfg.StopTimeout {
		t.Errorf("killed after %v, before the stop timeout %v", d, cfg.StopTimeout)
	}
}

// TestSyncLogs: a sync waits while a proc's pipe holds bytes not read, or
// a capture is not back waiting on its pipe; once every line written so
// far is sent, it returns. The proc here is two pipes this test writes to.
func TestSyncLogs(t *testing.T) {
	b := newJobBus(t, "j1")
	a := New(shell(""), b.conn)
	p := &proc{id: "c-1", ended: make(chan struct{})}
	var writers []*os.File
	for range 2 {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		p.outputs = append(p.outputs, r)
		writers = append(writers, w)
	}
	defer func() {
		for _, w := range writers {
			w.Close()
		}
	}()
	const n = 1000
	for i := range n {
		fmt.Fprintf(writers[i%2], "line %d\n", i)
	}
	// Nothing reads the pipes yet: the sync waits for its whole bound.
	start := time.Now()
	p.syncOutput(200 * time.Millisecond)
	if d := time.Since(start); d < 200*time.Millisecond {
		t.Fatalf("sync returned after %v with %d bytes unread", d, unread(p.outputs[0]))
	}
	// Captures read and send the lines; the sync returns once they are
	// all sent, long before its bound.
	for s, r := range p.outputs {
		p.captured.Add(1)
		go a.capture(p, logagg.Stream(s+1), r)
	}
	start = time.Now()
	p.syncOutput(10 * time.Second)
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("sync took %v", d)
	}
	if err := b.conn.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	b.waitFor("every line", func() bool { return len(b.lines) == n })
}

// TestStartFailure: a program that cannot start is an error on the ready
// port, for its rank.
func TestStartFailure(t *testing.T) {
	b := newJobBus(t, "j1")
	cfg := shell("")
	cfg.Program = "/nonexistent/program"
	a := New(cfg, b.conn)
	defer a.Close()
	a.SpawnProcs(wire.SpawnProcsReq{IDs: []string{"c-1"}, Ranks: []int{3}, Env: [][]string{nil}, Proc: "c", Port: 7})
	r := b.refusal(7, 3)
	if r.Sentinel != wire.ErrProcFailed.Error() || !strings.Contains(r.Message, "proc c-1 on h0: the program /nonexistent/program is refused: ") {
		t.Errorf("refusal %+v", r)
	}
}

// TestStandalone runs the agent `monarch agent` runs, in this process: it
// reports to the client, heartbeats, starts procs asked over the bus,
// announces their ends on the deaths subject, respawns one asked over the
// bus, drops what is not for it, and ends with its ctx.
func TestStandalone(t *testing.T) {
	b := newJobBus(t, "j2")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	args := jobenv.AgentArgs{Job: "j2", Index: 1, Program: "/bin/sh", Args: []string{"-c", "echo hello; exit 4"}}
	env := jobenv.Env{Bus: jobenv.Bus{URL: b.srv.URL(), Token: b.srv.Token()}, HostName: "h1"}
	done := make(chan error, 1)
	go func() { done <- Run(ctx, args, env, nil) }()

	b.waitFor("the agent's report", func() bool { return b.reply(wire.AgentsPort, 1) != nil })
	b.waitFor("a heartbeat", func() bool {
		for i, f := range b.msgs {
			if f.Method == wire.OpHeartbeat && b.subjs[i] == b.subj.Heartbeat("h1") {
				return true
			}
		}
		return false
	})
	// Something that is not for an agent, then a spawn.
	send := func(h wire.Header, body any) {
		w, err := wire.NewFrame(&h, bus.DefaultMaxMessage)
		if err != nil {
			t.Fatal(err)
		}
		defer w.Free()
		if body != nil {
			if err := w.Enc.Encode(body); err != nil {
				t.Fatal(err)
			}
		} else {
			w.Enc.EncodeNil()
		}
		if err := b.peer.Publish(b.subj.Proc("h1"), w.Bytes()); err != nil {
			t.Fatal(err)
		}
	}
	send(wire.Header{Kind: wire.KindControl, Method: wire.OpSpawn, ReplyTo: "c", Rank: -1}, nil)
	send(wire.Header{Kind: wire.KindControl, Method: wire.OpSpawnProcs, ReplyTo: "c", Port: 11, Rank: -1},
		&wire.SpawnProcsReq{IDs: []string{"c-9"}, Ranks: []int{0}, Env: [][]string{nil}, Proc: "c", Port: 11})
	announced := func(proc string) bool {
		for i, f := range b.msgs {
			if f.Method == wire.OpGone && b.subjs[i] == b.subj.Deaths("h1") {
				var n wire.GoneNotice
				if err := msgpack.Unmarshal(f.Payload, &n); err != nil {
					t.Fatal(err)
				}
				if n.Proc != proc {
					continue
				}
				if n.Reason != "exited with status 4 (host h1)" {
					t.Errorf("end announced as %+v", n)
				}
				return true
			}
		}
		return false
	}
	b.waitFor("the end announced", func() bool { return announced("c-9") })
	b.waitFor("the proc's line", func() bool { return len(b.lines) == 1 && b.lines[0].Text == "hello" })
	// A respawn over the bus: the ended proc's program runs again, under
	// its new id.
	send(wire.Header{Kind: wire.KindControl, Method: wire.OpRespawnProc, ReplyTo: "c", Port: 12, Rank: -1},
		&wire.RespawnProcReq{Old: "c-9", New: "c-10", Proc: "c", Port: 12})
	b.waitFor("the respawned proc's end announced", func() bool { return announced("c-10") })
	b.waitFor("the respawned proc's line", func() bool { return len(b.lines) == 2 && b.lines[1].Text == "hello" && b.lines[1].Proc == "c-10" })
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not end 10s after its ctx")
	}
}

// TestStandaloneRefusesIncompleteConfig: nothing starts without a job,
// bus, secret, program and index.
func TestStandaloneRefusesIncompleteConfig(t *testing.T) {
	err := Run(context.Background(), jobenv.AgentArgs{Job: "j", Index: 0, Program: "p"}, jobenv.Env{Bus: jobenv.Bus{URL: "nats://127.0.0.1:1"}}, nil)
	if err == nil || !strings.Contains(err.Error(), "incomplete agent configuration") {
		t.Errorf("Run without a token: %v", err)
	}
}

func TestMain(m *testing.M) {
	env := testenv.Setup() // the agent writes a system log: not into the user's dirs
	switch {
	case os.Getenv(testProcVar) == readyProcMode && jobenv.IsProc():
		os.Exit(readyProc()) // a proc of respawn_test.go
	case os.Getenv(testProcVar) != "" && jobenv.IsProc():
		os.Exit(busProc()) // a proc of hostbus_test.go
	}
	code := m.Run()
	testcluster.StopIfStarted()
	os.Exit(env.Finish(code))
}

// TestLiveness: a proc that has beaten once and then shows no life for
// the timeout is killed and told as unresponsive; one that keeps writing
// is alive; a round in which the agent itself was starved judges nobody.
func TestLiveness(t *testing.T) {
	b := newJobBus(t, "j1")
	ended := make(chan wire.GoneNotice, 2)
	cfg := shell(`test -n "$CHATTY" && while :; do echo tick; sleep 0.05; done; exec sleep 60`)
	cfg.OnEnd = func(n wire.GoneNotice) { ended <- n }
	a := New(cfg, b.conn)
	defer a.Close()
	a.SpawnProcs(wire.SpawnProcsReq{IDs: []string{"c-1", "c-2"}, Ranks: []int{0, 1}, Env: [][]string{nil, {"CHATTY=1"}}, Proc: "c", Port: 7})
	a.Alive("c-1")
	a.Alive("c-2")
	// Starved: the silent proc gets a fresh start, not a verdict.
	a.judge(time.Now().Add(time.Hour), time.Second, true)
	select {
	case n := <-ended:
		t.Fatalf("a round of a starved agent ended %+v", n)
	default:
	}
	a.Alive("c-1") // (the starved round moved its clock ahead)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go a.WatchLiveness(ctx, 500*time.Millisecond)
	select {
	case n := <-ended:
		if n.Proc != "c-1" || n.Stopped || !strings.Contains(n.Reason, "unresponsive") || !strings.Contains(n.Reason, "killed by SIGKILL") {
			t.Errorf("end told as %+v", n)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the silent proc was not killed within 10s")
	}
	// The one that writes lives on.
	select {
	case n := <-ended:
		t.Errorf("a proc that writes ended: %+v", n)
	case <-time.After(time.Second):
	}
}

// TestBusy: liveness spares a silent proc that is working (CPU time
// grows), not one that sleeps or is stopped.
func TestBusy(t *testing.T) {
	start := func(script string) *proc {
		c, err := child.Start(exec.Command("sh", "-c", script))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Kill(); <-c.Done() })
		return &proc{id: script, process: execProcess{c}}
	}
	spinning, sleeping, stopped := start("while :; do :; done"), start("sleep 60"), start("while :; do :; done")
	if err := syscall.Kill(stopped.process.Pid(), syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for !spinning.busy() || spinning.cpuTicks.Load() < 2 { // two ticks: it ran across two looks
		if time.Now().After(deadline) {
			t.Fatal("a spinning process never looked busy")
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond)
	sleeping.busy() // the first look only takes its time
	time.Sleep(200 * time.Millisecond)
	if sleeping.busy() {
		t.Error("a sleeping process looked busy")
	}
	time.Sleep(200 * time.Millisecond)
	if stopped.busy() {
		t.Error("a stopped process looked busy")
	}
}

// TestGPUsBounded: a proc's GPU index picks from the GPUs the scheduler
// gave the host (the agent's CUDA_VISIBLE_DEVICES); an index past them
// fails its start, naming the host.
func TestGPUsBounded(t *testing.T) {
	t.Setenv("CUDA_VISIBLE_DEVICES", "4,6")
	b := newJobBus(t, "j1")
	dir := t.TempDir()
	a := New(shell(""), b.conn)
	defer a.Close()
	var env [][]string
	for i := range 3 {
		env = append(env, []string{"CUDA_VISIBLE_DEVICES=" + strconv.Itoa(i), "RANK=" + strconv.Itoa(i)})
	}
	a.SpawnProcs(wire.SpawnProcsReq{IDs: []string{"c-1", "c-2", "c-3"}, Ranks: []int{0, 1, 2}, Env: env, Proc: "c", Port: 7,
		Command: []string{"sh", "-c", `echo "$CUDA_VISIBLE_DEVICES" > ` + dir + `/$RANK`}})
	b.waitFor("the refusal of rank 2", func() bool { return b.reply(7, 2) != nil })
	var r wire.ErrorReply
	if f := b.reply(7, 2); msgpack.Unmarshal(f.Payload, &r) != nil || !strings.Contains(r.Message, "GPU index 2, but the host has 2 GPUs (CUDA_VISIBLE_DEVICES=4,6)") ||
		!strings.Contains(r.Message, "on h0") {
		t.Errorf("rank 2: %+v", r)
	}
	for rank, want := range []string{"4", "6"} {
		var got []byte
		for end := time.Now().Add(10 * time.Second); len(got) == 0 && time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
			got, _ = os.ReadFile(filepath.Join(dir, strconv.Itoa(rank)))
		}
		if strings.TrimSpace(string(got)) != want {
			t.Errorf("rank %d: CUDA_VISIBLE_DEVICES=%q, want %s", rank, got, want)
		}
	}
}
