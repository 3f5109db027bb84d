package hostagent

import (
	"bytes"
	"os"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/monarch-go/monarch/internal/wire"
)

// TestCloseEndsWhatEndedProcsLeft: a proc that ended on its own leaves a
// sleep in its process group; the agent's Close ends it (its keeper),
// and the keeper goes too. The agent's death by SIGKILL is
// systest.TestAgentKilledLeavesNothing's.
func TestCloseEndsWhatEndedProcsLeft(t *testing.T) {
	b := newJobBus(t, "j1")
	ended := make(chan wire.GoneNotice, 1)
	cfg := shell(`sleep 987.81 >/dev/null 2>&1 & echo $!`)
	cfg.OnEnd = func(n wire.GoneNotice) { ended <- n }
	a := New(cfg, b.conn)
	defer a.Close()
	a.SpawnProcs(wire.SpawnProcsReq{IDs: []string{"c-1"}, Ranks: []int{0}, Env: [][]string{nil}, Proc: "c", Port: 7})
	select {
	case <-ended:
	case <-time.After(10 * time.Second):
		t.Fatal("the proc's end was not told within 10s")
	}
	b.waitFor("the sleep's pid", func() bool { return len(b.lines) == 1 })
	sleep, err := strconv.Atoi(b.lines[0].Text)
	if err != nil {
		t.Fatalf("line %q: %v", b.lines[0].Text, err)
	}
	t.Cleanup(func() { syscall.Kill(sleep, syscall.SIGKILL) })
	if syscall.Kill(sleep, 0) != nil {
		t.Fatalf("sleep %d ended with its shell: the test shows nothing", sleep)
	}
	keeper := a.keeper.k.Pid()

	a.Close()
	for _, pid := range []int{sleep, keeper} {
		deadline := time.Now().Add(10 * time.Second)
		for syscall.Kill(pid, 0) != syscall.ESRCH && !zombie(pid) {
			if time.Now().After(deadline) {
				t.Errorf("%d still running 10s after the agent's Close", pid)
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// zombie reports whether pid has ended, not yet reaped by its parent
// (init, for an orphan).
func zombie(pid int) bool {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	i := bytes.LastIndexByte(stat, ')')
	return err == nil && i > 0 && i+2 < len(stat) && stat[i+2] == 'Z'
}
