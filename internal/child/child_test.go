package child

import (
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestStartAndDescribe(t *testing.T) {
	tests := []struct {
		script string
		want   string
		status int
	}{
		{"exit 0", "exited with status 0", 0},
		{"exit 3", "exited with status 3", 3},
		{"kill -KILL $$", "killed by SIGKILL", 137},
		{"kill -TERM $$", "killed by SIGTERM", 143},
	}
	for _, tt := range tests {
		t.Run(tt.script, func(t *testing.T) {
			p, err := Start(exec.Command("sh", "-c", tt.script))
			if err != nil {
				t.Fatal(err)
			}
			select {
			case <-p.Done():
			case <-time.After(10 * time.Second):
				t.Fatal("child not reaped after 10s")
			}
			if got := Describe(p.Err()); got != tt.want {
				t.Errorf("Describe = %q, want %q", got, tt.want)
			}
			if got := ExitStatus(p.Cmd.ProcessState); got != tt.status {
				t.Errorf("ExitStatus = %d, want %d", got, tt.status)
			}
		})
	}
}

func TestPdeathsigSet(t *testing.T) {
	cmd := exec.Command("true")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	p, err := Start(cmd)
	if err != nil {
		t.Fatal(err)
	}
	<-p.Done()
	if a := cmd.SysProcAttr; a.Pdeathsig != syscall.SIGKILL || !a.Setpgid {
		t.Errorf("SysProcAttr %+v: want Pdeathsig SIGKILL and Setpgid kept", a)
	}
}

func TestStartError(t *testing.T) {
	if _, err := Start(exec.Command("/nonexistent/program")); err == nil {
		t.Fatal("started a program that does not exist")
	}
}

// TestStopAll: a child that exits on SIGTERM goes at once; one that
// ignores it is killed once the grace period has passed, with its group.
func TestStopAll(t *testing.T) {
	polite, err := Start(exec.Command("sleep", "60"))
	if err != nil {
		t.Fatal(err)
	}
	stubborn := exec.Command("sh", "-c", "trap '' TERM; sleep 60 & wait")
	stubborn.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	s, err := Start(stubborn)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond) // let the shell set its trap
	start := time.Now()
	StopAll([]*Process{polite, s}, 300*time.Millisecond)
	if !polite.Exited() || !s.Exited() {
		t.Fatal("StopAll returned with a child running")
	}
	if got := Describe(polite.Err()); got != "killed by SIGTERM" {
		t.Errorf("polite child: %s", got)
	}
	if got := Describe(s.Err()); got != "killed by SIGKILL" {
		t.Errorf("stubborn child: %s", got)
	}
	if d := time.Since(start); d < 300*time.Millisecond {
		t.Errorf("StopAll returned after %v, before the grace period", d)
	}
	// The stubborn shell's own child (sleep) was in its group: gone too.
	// It is not our child: it may take a moment to go.
	var out []byte
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if out, _ = exec.Command("pgrep", "-g", strconv.Itoa(s.Pid())).Output(); len(strings.TrimSpace(string(out))) == 0 {
			return
		}
	}
	t.Errorf("processes left in the stopped child's group 5s after StopAll: %s", out)
}
