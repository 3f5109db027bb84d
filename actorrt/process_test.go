package actorrt_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/monarch-go/monarch/actorrt"
	"github.com/monarch-go/monarch/bus"
)

// runHelper runs a small client program inside the test binary, for tests
// that need a client they can kill.
func runHelper(name string) int {
	switch name {
	case "loglines":
		return helperLogLines()
	case "tree":
		return helperTree()
	case "failure":
		return helperFailure()
	case "failure-own-hook":
		return helperFailureOwnHook()
	case "goon-hook":
		return helperGoOnHook()
	case "mailbox":
		return helperMailbox()
	case "cleanup-sigterm":
		return helperCleanupSigterm()
	case "toolarge":
		return helperTooLarge()
	case "raw-rr", "raw-fan", "raw-sink":
		return runRawHelper(name)
	case "raw-tcp-echo":
		return runTCPEcho()
	case "not-started":
		_, err := actorrt.Spawn[Echo](context.Background(), actorrt.ThisProc(context.Background()), "x")
		fmt.Println(err)
		if errors.Is(err, actorrt.ErrNotStarted) {
			return 0
		}
		return 1
	}
	fmt.Fprintln(os.Stderr, "unknown helper", name)
	return 2
}

func helperCmd(t *testing.T, name string) *exec.Cmd {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), "MONARCH_TEST_HELPER="+name)
	cmd.Stderr = os.Stderr
	return cmd
}

// alive reports whether pid is a running (not zombie) process.
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// The state follows the ")" that closes the command name.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && i+2 < len(s) && s[i+2] != 'Z' && s[i+2] != 'X'
}

// TestProcExitsWhenBusGoes starts a proc by hand against a bus of this
// test, then shuts the bus down: the proc must exit on its own.
func TestProcExitsWhenBusGoes(t *testing.T) {
	srv, err := bus.StartServer(bus.ServerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown()
	conn, err := bus.ConnectInProcess(srv, bus.ConnOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.Subscribe("mon.bustest.proc.parent"); err != nil {
		t.Fatal(err)
	}
	ready := make(chan struct{}, 1)
	go conn.Run(context.Background(), func(bus.Message) { ready <- struct{}{} })

	exe, _ := os.Executable()
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), "MONARCH_JOB=bustest", "MONARCH_PROC=orphan-1", "MONARCH_BUS_URL="+srv.URL(),
		"MONARCH_BUS_TOKEN="+srv.Token(), "MONARCH_PARENT=parent", "MONARCH_READY_PORT=1", "MONARCH_READY_RANK=0")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case <-ready:
	case err := <-exited:
		t.Fatalf("proc exited before it was ready: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("proc not ready within 30s")
	}
	start := time.Now()
	srv.Shutdown()
	select {
	case err := <-exited:
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 1 {
			t.Fatalf("proc ended with %v, want exit status 1", err)
		}
		t.Logf("proc exited %v after its bus went away", time.Since(start).Round(time.Millisecond))
	case <-time.After(10 * time.Second):
		t.Fatal("proc still running 10s after its bus went away")
	}
}

// TestNotStarted: using the runtime outside Main is an error, not a panic.
func TestNotStarted(t *testing.T) {
	cmd := helperCmd(t, "not-started")
	out, err := cmd.Output()
	if err != nil || !strings.Contains(string(out), "call actorrt.Main first") {
		t.Fatalf("helper: %v, output %q", err, out)
	}
}
