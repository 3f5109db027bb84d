package hostagent

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/monarch-go/monarch/internal/testcluster"
	"github.com/monarch-go/monarch/internal/wire"
	"github.com/monarch-go/monarch/logagg"
)

// script is a program that says who it is and leaves a mark where it ran.
func script(name, mark string) string {
	return "#!/bin/sh\necho " + name + "\ntouch " + mark + "\n"
}

func sumOf(content string) string {
	s := sha256.Sum256([]byte(content))
	return hex.EncodeToString(s[:])
}

// spawnLines starts proc id of a and returns what it wrote on stdout,
// once it ended.
func spawnLines(t *testing.T, b *jobBus, a *Agent, id string, ended chan wire.GoneNotice) []string {
	t.Helper()
	a.SpawnProcs(wire.SpawnProcsReq{IDs: []string{id}, Ranks: []int{0}, Env: [][]string{nil}, Proc: "c", Port: 7})
	select {
	case <-ended:
	case <-time.After(10 * time.Second):
		t.Fatalf("proc %s did not end within 10s", id)
	}
	var lines []string
	b.waitFor("its line", func() bool {
		lines = lines[:0]
		for _, l := range b.lines {
			if l.Proc == id && l.Stream == logagg.Stdout {
				lines = append(lines, l.Text)
			}
		}
		return len(lines) > 0
	})
	return lines
}

// TestProgramSwapped: the agent checks its program once and runs every
// proc from that descriptor: a program replaced at its path after that
// is not what its procs run, spawned or respawned.
func TestProgramSwapped(t *testing.T) {
	b := newJobBus(t, "j1")
	dir := t.TempDir()
	path := filepath.Join(dir, "prog")
	marks := t.TempDir()
	sent := script("sent", filepath.Join(marks, "sent"))
	if err := os.WriteFile(path, []byte(sent), 0o500); err != nil {
		t.Fatal(err)
	}
	ended := make(chan wire.GoneNotice, 4)
	cfg := Config{ID: "c", Job: "j1", Host: "h0", Program: path, ProgramSum: sumOf(sent), StopTimeout: time.Second,
		OnEnd: func(n wire.GoneNotice) { ended <- n }}
	a := New(cfg, b.conn)
	defer a.Close()
	if lines := spawnLines(t, b, a, "c-1", ended); strings.Join(lines, ",") != "sent" {
		t.Fatalf("first proc: %q", lines)
	}
	// Another file takes its name (a rename, as an installer or an
	// attacker with the folder would), then a proc is spawned and one
	// respawned.
	other := filepath.Join(dir, "other")
	if err := os.WriteFile(other, []byte(script("swapped", filepath.Join(marks, "swapped"))), 0o500); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(other, path); err != nil {
		t.Fatal(err)
	}
	if lines := spawnLines(t, b, a, "c-2", ended); strings.Join(lines, ",") != "sent" {
		t.Fatalf("proc after the swap: %q", lines)
	}
	go a.RespawnProc(wire.RespawnProcReq{Old: "c-1", New: "c-3", Proc: "c", Port: 9})
	<-ended
	b.waitFor("the respawned proc's line", func() bool {
		for _, l := range b.lines {
			if l.Proc == "c-3" {
				return l.Text == "sent"
			}
		}
		return false
	})
	if _, err := os.Stat(filepath.Join(marks, "swapped")); err == nil {
		t.Error("the swapped program ran")
	}
}

// TestProgramRefused: the agent runs no proc of a program that another
// user could have put there or changed (planted by the test cluster's
// other user, in a folder of theirs, in a folder others may write), nor
// one whose sha256 is not the one sent; the refusal, on the ready port,
// says which file or folder and why, and what to do.
func TestProgramRefused(t *testing.T) {
	c := testcluster.Get(t)
	root, err := os.MkdirTemp("/tmp", "agent-program-") // reachable by the other user
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	pub := filepath.Join(root, "pub")
	os.Chmod(root, 0o755)
	os.Mkdir(pub, 0)
	syscall.Chmod(pub, 0o1777) // as /tmp
	marks := t.TempDir()
	asOther := func(script string, args ...string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		out, err := c.AsOther(ctx, "", "sh", append([]string{"-c", "set -e; " + script, "sh"}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("as %s: %v: %s", c.Other.Name, err, out)
		}
	}
	for _, tt := range []struct {
		name string
		make func(content string) string // the program's path
		sum  func(content string) string
		why  string
	}{
		{"planted by the other user", func(content string) string {
			p := filepath.Join(pub, "planted", "prog")
			asOther(`mkdir -m 755 "$(dirname "$1")"; printf '%s' "$2" >"$1"; chmod 755 "$1"`, p, content)
			return p
		}, sumOf, "prog belongs to " + c.Other.Name},
		{"in a folder of the other user's", func(content string) string {
			d := filepath.Join(pub, "theirs")
			asOther(`mkdir -m 755 "$1"`, d)
			p := filepath.Join(d, "prog")
			os.WriteFile(p, []byte(content), 0o500)
			return p
		}, sumOf, "theirs belongs to " + c.Other.Name},
		{"in a folder others may write", func(content string) string {
			d := filepath.Join(root, "group")
			os.Mkdir(d, 0)
			os.Chmod(d, 0o775)
			p := filepath.Join(d, "prog")
			os.WriteFile(p, []byte(content), 0o500)
			return p
		}, sumOf, "group is writable by others (mode 0775)"},
		{"not what was sent", func(content string) string {
			d := filepath.Join(root, "ours")
			os.Mkdir(d, 0o700)
			p := filepath.Join(d, "prog")
			os.WriteFile(p, []byte(content), 0o500)
			return p
		}, func(string) string { return sumOf("what the launcher sent") }, "prog has sha256 "},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b := newJobBus(t, "j1")
			mark := filepath.Join(marks, strings.ReplaceAll(tt.name, " ", "-"))
			content := script("planted", mark)
			path := tt.make(content)
			ended := make(chan wire.GoneNotice, 1)
			a := New(Config{ID: "c", Job: "j1", Host: "h0", Program: path, ProgramSum: tt.sum(content), StopTimeout: time.Second,
				OnEnd: func(n wire.GoneNotice) { ended <- n }}, b.conn)
			defer a.Close()
			a.SpawnProcs(wire.SpawnProcsReq{IDs: []string{"c-1"}, Ranks: []int{0}, Env: [][]string{nil}, Proc: "c", Port: 7})
			r := b.refusal(7, 0)
			if r.Sentinel != wire.ErrProcFailed.Error() || !strings.Contains(r.Message, "proc c-1 on h0: the program "+path+" is refused: ") ||
				!strings.Contains(r.Message, tt.why) {
				t.Errorf("refusal %q, want %q", r.Message, tt.why)
			}
			t.Log(r.Message)
			select {
			case n := <-ended:
				t.Errorf("a proc ran: %+v", n)
			case <-time.After(100 * time.Millisecond):
			}
			if _, err := os.Stat(mark); err == nil {
				t.Error("the program ran")
			}
		})
	}
}
