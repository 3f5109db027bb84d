package hostlink

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A child process that holds a link: the test binary run again.
func TestMain(m *testing.M) {
	if addr := os.Getenv("HOSTLINK_TEST_DIAL"); addr != "" {
		if err := Dial(context.Background(), addr, os.Getenv("HOSTLINK_TEST_TOKEN"), "h1", 0); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		fmt.Println("UP")
		select {}
	}
	os.Exit(m.Run())
}

func validID(s string) bool { return s != "" && len(s) < 64 }

func startWatcher(t *testing.T) (*Watcher, chan Event) {
	t.Helper()
	events := make(chan Event, 16)
	w, err := Listen(WatcherOptions{Token: "secret", OnEvent: func(e Event) { events <- e }, ValidID: validID})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Close)
	return w, events
}

// startAgent runs a child that links to w with token, and waits for it to
// say its link is up.
func startAgent(t *testing.T, w *Watcher, token string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "HOSTLINK_TEST_DIAL=127.0.0.1:"+strconv.Itoa(w.Port()), "HOSTLINK_TEST_TOKEN="+token)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGCONT)
		cmd.Process.Kill()
		cmd.Wait()
	})
	var b [3]byte
	out.Read(b[:])
	return cmd
}

func next(t *testing.T, events chan Event, within time.Duration) Event {
	t.Helper()
	select {
	case e := <-events:
		return e
	case <-time.After(within):
		t.Fatalf("no link event within %v", within)
		return Event{}
	}
}

// An agent's link is up while it lives, stopped or not, and down at once
// when its process is killed.
func TestLinkFollowsTheProcess(t *testing.T) {
	w, events := startWatcher(t)
	cmd := startAgent(t, w, "secret")
	if e := next(t, events, 10*time.Second); !e.Up || e.Agent != "h1" {
		t.Fatalf("first event %+v, want h1 up", e)
	}
	// Stopped: its kernel still answers for it.
	cmd.Process.Signal(syscall.SIGSTOP)
	select {
	case e := <-events:
		t.Fatalf("a stopped agent's link: %+v", e)
	case <-time.After(2*DefaultTimeout + time.Second):
	}
	cmd.Process.Signal(syscall.SIGCONT)
	start := time.Now()
	cmd.Process.Kill()
	e := next(t, events, 10*time.Second)
	if e.Up || e.Agent != "h1" || e.Cause == "" {
		t.Fatalf("after kill -9: %+v, want h1 down with a cause", e)
	}
	t.Logf("down %v after kill -9: %s", time.Since(start).Round(time.Millisecond), e.Cause)
}

// A wrong token, or bytes that are no hello, make no link.
func TestLinkRefusesStrangers(t *testing.T) {
	w, events := startWatcher(t)
	startAgent(t, w, "wrong")
	c, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(w.Port()))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var challenge [challengeLen]byte
	if _, err := c.Read(challenge[:]); err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(c, "h2 %x\n", make([]byte, 300))
	select {
	case e := <-events:
		t.Fatalf("a stranger made a link: %+v", e)
	case <-time.After(2 * time.Second):
	}
}

// An agent that dials again (its old link lost to it only) replaces its
// link without a down event.
func TestLinkRedialSupersedes(t *testing.T) {
	w, events := startWatcher(t)
	addr := "127.0.0.1:" + strconv.Itoa(w.Port())
	first, err := dialOnce(context.Background(), addr, "secret", "h3", DefaultTimeout)
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	if e := next(t, events, 5*time.Second); !e.Up {
		t.Fatalf("%+v", e)
	}
	ctx2, cancel2 := context.WithCancel(context.Background())
	defer cancel2()
	if err := Dial(ctx2, addr, "secret", "h3", 0); err != nil {
		t.Fatal(err)
	}
	if e := next(t, events, 5*time.Second); !e.Up {
		t.Fatalf("%+v", e)
	}
	cancel2()
	if e := next(t, events, 5*time.Second); e.Up || e.Agent != "h3" {
		t.Fatalf("%+v", e)
	}
}

// FuzzParseHello: whatever a peer sends as its hello is refused or read
// as an id and a proof of the right size, never a panic.
func FuzzParseHello(f *testing.F) {
	f.Add("h1 " + strings.Repeat("ab", 32) + "\n")
	f.Add("h1 zz\n")
	f.Add(" \n")
	f.Add("h1\n")
	f.Fuzz(func(t *testing.T, line string) {
		agent, mac, err := parseHello(line, validID)
		if err == nil && (!validID(agent) || len(mac) != 32) {
			t.Fatalf("accepted %q: %q %x", line, agent, mac)
		}
	})
}
