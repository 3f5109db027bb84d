package hostlink

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/monarch-go/monarch/internal/jobca"
	"github.com/monarch-go/monarch/internal/testcluster"
)

// A child process that holds a link: the test binary run again, over TLS
// when given the CA to trust; or one that floods a watcher (flood); or
// one that admits agents when told (agents).
func TestMain(m *testing.M) {
	if addr := os.Getenv("HOSTLINK_TEST_FLOOD"); addr != "" {
		n, _ := strconv.Atoi(os.Getenv("HOSTLINK_TEST_FLOOD_CONNS"))
		flood(addr, n, os.Getenv("HOSTLINK_TEST_FLOOD_CRED"), os.Getenv("HOSTLINK_TEST_FLOOD_KIND"))
	}
	if conf := os.Getenv("HOSTLINK_TEST_AGENTS"); conf != "" {
		agents(conf)
	}
	if addr := os.Getenv("HOSTLINK_TEST_DIAL"); addr != "" {
		o := DialOptions{Addr: addr, Agent: "h1", Token: os.Getenv("HOSTLINK_TEST_TOKEN")}
		if ca := os.Getenv("HOSTLINK_TEST_CA"); ca != "" {
			pool := x509.NewCertPool()
			pool.AppendCertsFromPEM([]byte(ca))
			o.TLS = &tls.Config{RootCAs: pool, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS13}
		}
		if _, err := Dial(context.Background(), o); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		fmt.Println("UP")
		select {}
	}
	code := m.Run()
	testcluster.StopIfStarted()
	os.Exit(code)
}

func validID(s string) bool { return s != "" && len(s) < 64 && !strings.ContainsAny(s, " \n") }

// startWatcher starts a watcher of o, with the token "secret", OnEvent
// and ValidID unless o has them.
func startWatcher(t testing.TB, o WatcherOptions) (*Watcher, chan Event) {
	t.Helper()
	events := make(chan Event, 16)
	if o.Token == "" {
		o.Token = "secret"
	}
	if o.OnEvent == nil {
		o.OnEvent = func(e Event) { events <- e }
	}
	if o.ValidID == nil {
		o.ValidID = validID
	}
	w, err := Listen(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Close)
	return w, events
}

func addrOf(w *Watcher) string { return "127.0.0.1:" + strconv.Itoa(w.Port()) }

// newCA is a job's CA; serverTLS the watcher's side of it, clientTLS an
// agent's.
func newCA(t testing.TB, job string) *jobca.CA {
	t.Helper()
	ca, err := jobca.New(job, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

func serverTLS(t testing.TB, ca *jobca.CA) *tls.Config {
	t.Helper()
	certPEM, keyPEM, err := ca.Issue("hub", []string{"127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	kp, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return &tls.Config{Certificates: []tls.Certificate{kp}, MinVersion: tls.VersionTLS13}
}

func clientTLS(ca *jobca.CA) *tls.Config {
	return &tls.Config{RootCAs: ca.Pool(), ServerName: "127.0.0.1", MinVersion: tls.VersionTLS13}
}

// startAgent runs a child that links to w with token (over TLS, trusting
// ca, when ca is set), and waits for it to say its link is up.
func startAgent(t *testing.T, w *Watcher, token string, ca *jobca.CA) *exec.Cmd {
	t.Helper()
	env := []string{"HOSTLINK_TEST_DIAL=" + addrOf(w), "HOSTLINK_TEST_TOKEN=" + token}
	if ca != nil {
		env = append(env, "HOSTLINK_TEST_CA="+string(ca.CertPEM()))
	}
	cmd, _, out := startChild(t, env...)
	var b [3]byte
	out.Read(b[:]) // "UP", or EOF when it failed; bounded by the child's handshake wait
	return cmd
}

// startChild runs the test binary again with env added (see TestMain),
// its stdin and stdout the caller's; it ends with the test.
func startChild(t testing.TB, env ...string) (cmd *exec.Cmd, stdin io.WriteCloser, stdout io.Reader) {
	t.Helper()
	cmd = exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), env...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err = cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stdin.Close()
		cmd.Process.Signal(syscall.SIGCONT)
		cmd.Process.Kill()
		cmd.Wait()
	})
	return cmd, stdin, stdout
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

// none checks that no event comes within d.
func none(t *testing.T, events chan Event, d time.Duration) {
	t.Helper()
	select {
	case e := <-events:
		t.Fatalf("unexpected link event %+v", e)
	case <-time.After(d):
	}
}

// An agent's link is up while it lives, stopped or not, and down at once
// when its process is killed: over TCP and over TLS alike, since the
// kernels keep the TCP conn under either.
func TestLinkFollowsTheProcess(t *testing.T) {
	for _, overTLS := range []bool{false, true} {
		t.Run(map[bool]string{false: "tcp", true: "tls"}[overTLS], func(t *testing.T) {
			t.Parallel()
			var o WatcherOptions
			var ca *jobca.CA
			if overTLS {
				ca = newCA(t, "j1")
				o.TLS = serverTLS(t, ca)
			}
			w, events := startWatcher(t, o)
			cmd := startAgent(t, w, "secret", ca)
			if e := next(t, events, 10*time.Second); !e.Up || e.Agent != "h1" {
				t.Fatalf("first event %+v, want h1 up", e)
			}
			// Stopped: its kernel still answers for it.
			cmd.Process.Signal(syscall.SIGSTOP)
			none(t, events, 2*DefaultTimeout+time.Second)
			cmd.Process.Signal(syscall.SIGCONT)
			start := time.Now()
			cmd.Process.Kill()
			e := next(t, events, 10*time.Second)
			if e.Up || e.Agent != "h1" || e.Cause == "" {
				t.Fatalf("after kill -9: %+v, want h1 down with a cause", e)
			}
			t.Logf("down %v after kill -9: %s", time.Since(start).Round(time.Millisecond), e.Cause)
		})
	}
}

// A wrong token, or bytes that are no hello, make no link.
func TestLinkRefusesStrangers(t *testing.T) {
	w, events := startWatcher(t, WatcherOptions{})
	startAgent(t, w, "wrong", nil)
	c, _, _ := rawDial(t, w) // once its source's penalty for the wrong token is over
	fmt.Fprintf(c, "h2 %x\n", make([]byte, 300))
	none(t, events, 2*time.Second)
}

// An agent that dials again (its old link lost to it only) replaces its
// link without a down event.
func TestLinkRedialSupersedes(t *testing.T) {
	w, events := startWatcher(t, WatcherOptions{})
	o := DialOptions{Addr: addrOf(w), Agent: "h3", Token: "secret", Timeout: DefaultTimeout}
	first, _, err := dialOnce(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	if e := next(t, events, 5*time.Second); !e.Up {
		t.Fatalf("%+v", e)
	}
	ctx2, cancel2 := context.WithCancel(context.Background())
	defer cancel2()
	if _, err := Dial(ctx2, o); err != nil {
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
// as an id and one proof of the right shape, never a panic.
func FuzzParseHello(f *testing.F) {
	f.Add("h1 " + strings.Repeat("ab", 32) + "\n")
	f.Add("h1 munge MUNGE:AwQFAAAo4h091XDxm13S+/=:\n")
	f.Add("h1 munge \n")
	f.Add("h1 munge MUNGE: x\n")
	f.Add("h1 zz\n")
	f.Add(" \n")
	f.Add("h1\n")
	f.Fuzz(func(t *testing.T, line string) {
		h, err := parseHello(line, validID)
		if err != nil {
			return
		}
		hmacProof := len(h.mac) == 32 && h.cred == nil
		mungeProof := h.mac == nil && credential(string(h.cred))
		if !validID(h.agent) || hmacProof == mungeProof {
			t.Fatalf("accepted %q: %+v", line, h)
		}
		if again, err := parseHello(formatHello(h), validID); err != nil || again.agent != h.agent || string(again.mac) != string(h.mac) || string(again.cred) != string(h.cred) {
			t.Fatalf("%+v does not read back: %+v, %v", h, again, err)
		}
	})
}
