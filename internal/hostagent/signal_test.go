package hostagent

import (
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// TestCatches: a process is said to catch a signal only when it has a
// handler for it: not when it leaves the default (which would end it)
// nor when it ignores it.
func TestCatches(t *testing.T) {
	for _, tt := range []struct {
		name, script string
		want         bool
	}{
		{"handler", `trap 'echo got' USR1; echo ready; while :; do sleep 0.05; done`, true},
		{"default", `echo ready; while :; do sleep 0.05; done`, false},
		{"ignored", `trap '' USR1; echo ready; while :; do sleep 0.05; done`, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cmd := exec.Command("sh", "-c", tt.script)
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer func() { cmd.Process.Kill(); cmd.Wait() }()
			ready := make(chan struct{})
			go func() { b := make([]byte, 6); out.Read(b); close(ready) }()
			select {
			case <-ready: // the trap is set
			case <-time.After(10 * time.Second):
				t.Fatal("the shell did not start")
			}
			if got := catches(cmd.Process.Pid, syscall.SIGUSR1); got != tt.want {
				status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", cmd.Process.Pid))
				t.Errorf("catches SIGUSR1: %v, want %v; status (%v):\n%s", got, tt.want, err, status)
			}
		})
	}
	if catches(1<<30, syscall.SIGUSR1) {
		t.Error("a pid that does not exist catches SIGUSR1")
	}
}

func TestStatusMask(t *testing.T) {
	status := []byte("Name:\tpython3\nSigIgn:\t0000000001001000\nSigCgt:\t0000000180000a00\n")
	if m, ok := statusMask(status, "SigCgt:"); !ok || m != 0x180000a00 {
		t.Errorf("SigCgt: %x, %v", m, ok)
	}
	if _, ok := statusMask([]byte("Name:\tx\n"), "SigCgt:"); ok {
		t.Error("a status without SigCgt has one")
	}
	if _, ok := statusMask([]byte("SigCgt:\tzz\n"), "SigCgt:"); ok {
		t.Error("a bad mask read")
	}
}
