package launch

import (
	"context"
	"errors"
	"io"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/monarch-go/monarch/internal/child"
	"github.com/monarch-go/monarch/internal/jobenv"
)

func startSh(t *testing.T, script string) *child.Process {
	t.Helper()
	p, err := child.Start(exec.Command("sh", "-c", script))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Stop(0) })
	return p
}

// within runs f and fails the test if it takes longer than d.
func within(t *testing.T, d time.Duration, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { f(); close(done) }()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("%s: still waiting after %v", what, d)
	}
}

func TestSuperviseClient(t *testing.T) {
	noEnd := func(agentEnd) error { return nil }
	t.Run("exit status", func(t *testing.T) {
		within(t, 10*time.Second, "exit 3", func() {
			code, stopped, err := superviseClient(context.Background(), startSh(t, "exit 3"), stopTimes{grace: time.Second}, nil, noEnd)
			if code != 3 || stopped || err != nil {
				t.Errorf("exit 3: %d %v %v", code, stopped, err)
			}
		})
	})
	t.Run("ctx ends", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		p := startSh(t, "exec sleep 60")
		time.AfterFunc(50*time.Millisecond, cancel)
		within(t, 10*time.Second, "SIGTERM", func() {
			code, stopped, err := superviseClient(ctx, p, stopTimes{grace: 10 * time.Second, stop: time.Minute}, nil, noEnd)
			if code != 128+15 || !stopped || err != nil {
				t.Errorf("after ctx ends: %d %v %v, want 143, stopped", code, stopped, err)
			}
		})
	})
	t.Run("killed after grace", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cmd := exec.Command("sh", "-c", "trap '' TERM; echo ready; read x")
		stdin, _ := cmd.StdinPipe()
		defer stdin.Close()
		out, _ := cmd.StdoutPipe()
		p, err := child.Start(cmd)
		if err != nil {
			t.Fatal(err)
		}
		io.ReadFull(out, make([]byte, 6)) // the trap is set
		cancel()
		within(t, 10*time.Second, "SIGKILL", func() {
			code, stopped, err := superviseClient(ctx, p, stopTimes{grace: 50 * time.Millisecond, stop: 50 * time.Millisecond}, nil, noEnd)
			if code != 128+9 || !stopped || err != nil {
				t.Errorf("a client that ignores SIGTERM: %d %v %v, want 137, stopped", code, stopped, err)
			}
		})
	})
	t.Run("time-limit warning", func(t *testing.T) {
		warn := make(chan time.Time, 1)
		warn <- time.Now()
		cmd := exec.Command("sh", "-c", "trap 'exit 42' USR1; echo ready; while :; do sleep 0.1; done")
		out, _ := cmd.StdoutPipe()
		p, err := child.Start(cmd)
		if err != nil {
			t.Fatal(err)
		}
		io.ReadFull(out, make([]byte, 6)) // the trap is set
		within(t, 10*time.Second, "SIGUSR1", func() {
			code, stopped, err := superviseClient(context.Background(), p, stopTimes{grace: time.Second, warn: warn}, nil, noEnd)
			if code != 42 || stopped || err != nil {
				t.Errorf("warned: %d %v %v, want 42 (the client's USR1 trap), not stopped", code, stopped, err)
			}
		})
	})
	t.Run("an agent fails", func(t *testing.T) {
		ended := make(chan agentEnd, 2)
		ended <- agentEnd{what: "ssh h9", err: errors.New("no route")}
		ended <- agentEnd{what: "ssh h8", err: errors.New("no route")}
		var seen []string
		within(t, 10*time.Second, "the launcher's failure", func() {
			code, stopped, err := superviseClient(context.Background(), startSh(t, "exec sleep 60"), stopTimes{grace: 10 * time.Second}, ended, func(e agentEnd) error {
				seen = append(seen, e.what)
				if len(seen) == 1 {
					return errors.New("launch: host agents could not start: " + e.String())
				}
				return nil
			})
			if code != 1 || stopped || err == nil || !strings.Contains(err.Error(), "ssh h9 no route") || len(seen) != 2 {
				t.Errorf("after an agent failed: %d %v %v (saw %q), want 1 and its error", code, stopped, err, seen)
			}
		})
	})
}

func TestAgentsStop(t *testing.T) {
	a := newAgents(3)
	said := make(chan struct{}, 3)
	for i := range 3 {
		cmd := exec.Command("sh", "-c", "echo going >&2; exec sleep 60")
		if err := a.start("agent "+jobenv.AgentID(i), []string{jobenv.AgentID(i)}, cmd, signalWriter(said)); err != nil {
			t.Fatal(err)
		}
	}
	for range 3 {
		select {
		case <-said:
		case <-time.After(10 * time.Second):
			t.Fatal("the agents wrote nothing")
		}
	}
	within(t, 10*time.Second, "stop", func() { a.stop(5 * time.Second) })
	for range 3 {
		select {
		case e := <-a.ended:
			if got := e.String(); !strings.HasPrefix(got, "agent h") || !strings.HasSuffix(got, " killed by SIGTERM: going") {
				t.Errorf("end reported as %q", got)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("an agent's end was not reported")
		}
	}
	var none *agents
	none.stop(time.Second) // no agents: nothing to do
	if none.endings() != nil {
		t.Error("no agents, yet endings")
	}
}

func TestAwaitHosts(t *testing.T) {
	subj := jobenv.SubjectsOf("j1")
	w := newJobWatch(subj)
	for _, s := range []string{subj.Heartbeat("c-1"), subj.Up(), subj.Up()} {
		w.saw(s) // procs: not hosts
	}
	if _, procs, _ := w.saw(subj.Heartbeat("h0")); w.hostsUp() != 1 || procs != 2 {
		t.Fatalf("hosts %d, procs %d; want 1, 2", w.hostsUp(), procs)
	}
	if _, _, changed := w.saw(subj.Heartbeat("h0")); changed {
		t.Error("a second heartbeat of h0 counted")
	}
	time.AfterFunc(50*time.Millisecond, func() { w.saw(subj.Heartbeat("h1")) })
	within(t, 5*time.Second, "two hosts", func() { w.awaitHosts(context.Background(), 2, nil) })
	start := time.Now()
	within(t, 5*time.Second, "the limit", func() { w.awaitHosts(context.Background(), 3, time.After(100*time.Millisecond)) })
	if time.Since(start) < 100*time.Millisecond {
		t.Error("awaitHosts returned before a host or its limit")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	within(t, 5*time.Second, "ctx", func() { w.awaitHosts(ctx, 3, nil) })
}

// signalWriter signals c at every write.
type signalWriter chan struct{}

func (c signalWriter) Write(p []byte) (int, error) {
	c <- struct{}{}
	return len(p), nil
}
