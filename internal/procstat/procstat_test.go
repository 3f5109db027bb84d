package procstat

import (
	"os"
	"os/exec"
	"slices"
	"testing"
)

func TestParse(t *testing.T) {
	line := "4242 (a (weird) name) T 17 4242 25615 0 -1 4194304 1287 0 0 0 150 25 0 0 20 0 6 0 2040422 1694908416 4548\n"
	s, err := parse("x", []byte(line))
	if err != nil {
		t.Fatal(err)
	}
	if s != (Stat{State: 'T', PPID: 17, CPUTicks: 175, RSS: 4548 * int64(os.Getpagesize())}) || !s.Stopped() {
		t.Errorf("got %+v", s)
	}
	for _, bad := range []string{"", "12 noparen S 1", "1 (x) S 1 2 3", "1 (x) S one 2 3 4 5 6 7 8 9 10 11 12"} {
		if _, err := parse("x", []byte(bad)); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

func TestReadSelf(t *testing.T) {
	s, err := Read(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if s.PPID != os.Getppid() || s.State != 'R' && s.State != 'S' {
		t.Errorf("this process: %+v, want ppid %d and running or sleeping", s, os.Getppid())
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte("1 (x) S 0 1 1 0 -1 0 0 0 0 0 3 4 0 0 20 0 1 0 5"))
	f.Fuzz(func(t *testing.T, b []byte) { parse("fuzz", b) })
}

func TestChildren(t *testing.T) {
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	if got := Children(os.Getpid()); !slices.Contains(got, cmd.Process.Pid) {
		t.Errorf("Children of this process: %v, want %d among them", got, cmd.Process.Pid)
	}
	if got := Children(cmd.Process.Pid); len(got) != 0 {
		t.Errorf("Children of sleep: %v", got)
	}
}
