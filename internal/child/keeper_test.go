package child

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The parent a keeper test SIGKILLs: this test binary run again with
// keeperParentEnv set. It starts a keeper and a child in a group of its
// own that starts a grandchild (sh -c 'sleep N & wait'), registers the
// group (unless keeperParentEnv says "unkept"), prints "ready KEEPER
// GROUP", and waits to be killed.
const keeperParentEnv = "CHILD_TEST_KEEPER_PARENT"

func TestMain(m *testing.M) {
	if how := os.Getenv(keeperParentEnv); how != "" {
		os.Exit(keeperParent(how, os.Getenv("CHILD_TEST_SLEEP")))
	}
	os.Exit(m.Run())
}

func keeperParent(how, sleep string) int {
	k, err := StartKeeper()
	if err != nil {
		fmt.Println(err)
		return 1
	}
	cmd := exec.Command("sh", "-c", "sleep "+sleep+" & wait")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	p, err := Start(cmd)
	if err != nil {
		fmt.Println(err)
		return 1
	}
	if how == "kept" {
		if err := k.Keep(p.Pid()); err != nil {
			fmt.Println(err)
			return 1
		}
	}
	fmt.Printf("ready %d %d\n", k.Pid(), p.Pid())
	time.Sleep(time.Minute) // until the test kills it
	return 1
}

// group lists the processes of process group pgid.
func group(pgid int) string {
	out, _ := exec.Command("pgrep", "-g", strconv.Itoa(pgid)).Output()
	return strings.TrimSpace(string(out))
}

// gone polls (at most 10 s) until pid no longer exists.
func gone(pid int) bool {
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if syscall.Kill(pid, 0) == syscall.ESRCH {
			return true
		}
	}
	return false
}

// groupGone polls (at most 10 s) until group pgid is empty.
func groupGone(pgid int) bool {
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if group(pgid) == "" {
			return true
		}
	}
	return false
}

// startParent starts the keeper test's parent and returns it with its
// keeper's pid and its child's group, once the grandchild runs.
func startParent(t *testing.T, how, sleep string) (parent *exec.Cmd, keeper, pgid int) {
	t.Helper()
	parent = exec.Command("/proc/self/exe")
	parent.Env = append(os.Environ(), keeperParentEnv+"="+how, "CHILD_TEST_SLEEP="+sleep)
	out, err := parent.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := parent.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { parent.Process.Kill(); parent.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if _, serr := fmt.Sscanf(line, "ready %d %d", &keeper, &pgid); err != nil || serr != nil {
		t.Fatalf("parent said %q (%v)", line, err)
	}
	t.Cleanup(func() { syscall.Kill(-pgid, syscall.SIGKILL) })
	for end := time.Now().Add(10 * time.Second); strings.Count(group(pgid), "\n") < 1; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("group %d: %q, want the shell and its sleep", pgid, group(pgid))
		}
	}
	return parent, keeper, pgid
}

// TestKeeperEndsGroupsOnParentDeath: a parent SIGKILLed takes its child
// along (parent-death signal) and, through its keeper, the child's
// grandchild in its group; the keeper exits then. Unkept, the grandchild
// is left running: what the keeper is for.
func TestKeeperEndsGroupsOnParentDeath(t *testing.T) {
	parent, keeper, pgid := startParent(t, "kept", "987.61")
	parent.Process.Kill()
	parent.Wait()
	if !groupGone(pgid) {
		t.Errorf("10s after its parent's SIGKILL, group %d still has %s", pgid, group(pgid))
	}
	if !gone(keeper) {
		t.Errorf("keeper %d still running 10s after its parent's SIGKILL", keeper)
	}

	parent, keeper, pgid = startParent(t, "unkept", "987.62")
	parent.Process.Kill()
	parent.Wait()
	if !gone(keeper) {
		t.Errorf("keeper %d still running 10s after its parent's SIGKILL", keeper)
	}
	if group(pgid) == "" {
		t.Errorf("group %d, not kept, ended with its parent: the test shows nothing", pgid)
	}
}

// TestKeeperClose: Close ends the groups kept, not those forgotten, and
// the keeper.
func TestKeeperClose(t *testing.T) {
	k, err := StartKeeper()
	if err != nil {
		t.Fatal(err)
	}
	var groups [2]int
	for i := range groups {
		cmd := exec.Command("sh", "-c", fmt.Sprintf("sleep 987.7%d & wait", i))
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		p, err := Start(cmd)
		if err != nil {
			t.Fatal(err)
		}
		groups[i] = p.Pid()
		t.Cleanup(func() { syscall.Kill(-p.Pid(), syscall.SIGKILL); <-p.Done() })
		if err := k.Keep(p.Pid()); err != nil {
			t.Fatal(err)
		}
	}
	if err := k.Forget(groups[1]); err != nil {
		t.Fatal(err)
	}
	k.Close()
	k.Close()
	if !k.exited() {
		t.Error("Close returned with the keeper running")
	}
	if !groupGone(groups[0]) {
		t.Errorf("group kept %d still has %s after Close", groups[0], group(groups[0]))
	}
	if group(groups[1]) == "" {
		t.Errorf("group forgotten %d ended at Close", groups[1])
	}
	if err := k.Keep(groups[1]); err == nil {
		t.Error("Keep after Close: no error")
	}
	if err := k.Keep(-1); err == nil || !strings.Contains(err.Error(), "process group -1") {
		t.Errorf("Keep(-1): %v, want refused", err)
	}
}

func (k *Keeper) exited() bool {
	select {
	case <-k.done:
		return true
	default:
		return false
	}
}

func TestParseKeeperLine(t *testing.T) {
	tests := []struct {
		line    string
		keep    bool
		pgid    int
		wantErr string
	}{
		{"+1234", true, 1234, ""},
		{"-77", false, 77, ""},
		{"+1", false, 0, "no process group 1"},
		{"+0", false, 0, "no process group 0"},
		{"+-1", false, 0, "not a decimal"},
		{"+12a", false, 0, "not a decimal"},
		{"*12", false, 0, "want +pgid or -pgid"},
		{"+", false, 0, "want +pgid or -pgid"},
		{"+99999999999999999999", false, 0, "no process group"},
	}
	for _, tt := range tests {
		keep, pgid, err := parseKeeperLine([]byte(tt.line))
		switch {
		case tt.wantErr == "" && (err != nil || keep != tt.keep || pgid != tt.pgid):
			t.Errorf("%q: %v %d %v, want %v %d", tt.line, keep, pgid, err, tt.keep, tt.pgid)
		case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
			t.Errorf("%q: %v, want an error saying %q", tt.line, err, tt.wantErr)
		}
	}
}

// FuzzKeeperRead: whatever a keeper reads, it keeps only groups above 1,
// at most maxKept, and none a line did not name.
func FuzzKeeperRead(f *testing.F) {
	for _, s := range []string{"+1234\n-1234\n", "+5\n+6\n-5\n", "+1\n+0\n+-1\n", "+12", strings.Repeat("9", 100) + "\n+7\n", "+7\n\n\n-", "+\n-\n*3\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		g := &keptGroups{groups: map[int]bool{}}
		g.read(bytes.NewReader(in), func(error) {})
		if len(g.groups) > maxKept {
			t.Fatalf("%d groups kept", len(g.groups))
		}
		for pgid := range g.groups {
			if pgid < 2 {
				t.Fatalf("kept group %d", pgid)
			}
		}
		if lines := bytes.Count(in, []byte("\n")); len(g.groups) > lines {
			t.Fatalf("%d groups from %d lines", len(g.groups), lines)
		}
	})
}
