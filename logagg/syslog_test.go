package logagg

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A run that logs nothing leaves no system log file; the first message at
// the file's level creates it.
func TestSystemLogCreatedOnFirstWrite(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "syslogs")
	t.Setenv(EnvSystemLogDir, dir)
	t.Setenv(EnvFileLevel, "WARN")
	t.Setenv(EnvStderrLevel, "ERROR")
	l, c, err := SystemLogger("quiet", "client")
	if err != nil {
		t.Fatal(err)
	}
	l.Info().Msg("below the file's level")
	c.Close()
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("a run that wrote nothing made %s (%v)", dir, err)
	}
	l, c, err = SystemLogger("loud", "agent-h0")
	if err != nil {
		t.Fatal(err)
	}
	l.Warn().Msg("something to say")
	c.Close()
	b, err := os.ReadFile(SystemLogPath(dir, "loud", "agent-h0"))
	if err != nil || !strings.Contains(string(b), "something to say") {
		t.Fatalf("log file: %q, %v", b, err)
	}
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("dir: %v, %v", fi.Mode(), err)
	}
}

// A symbolic link, a directory of another user's or one others can
// write is refused at once, with what to do; so is a log file that is a
// link.
func TestSystemLogRefusesUnsafeDir(t *testing.T) {
	base := t.TempDir()
	target := filepath.Join(base, "elsewhere")
	os.Mkdir(target, 0o700)
	link := filepath.Join(base, "link")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	open := func(dir string) error {
		t.Helper()
		t.Setenv(EnvSystemLogDir, dir)
		_, c, err := SystemLogger("j", "client")
		if err == nil {
			c.Close()
		}
		return err
	}
	if err := open(link); err == nil || !strings.Contains(err.Error(), link+" is a symbolic link") || !strings.Contains(err.Error(), "rm "+link) {
		t.Errorf("symlink: %v", err)
	}
	open2 := filepath.Join(base, "open")
	os.Mkdir(open2, 0o700)
	os.Chmod(open2, 0o777)
	if err := open(open2); err == nil || !strings.Contains(err.Error(), "writable by other users") || !strings.Contains(err.Error(), "chmod 700 "+open2) {
		t.Errorf("world-writable: %v", err)
	}
	if os.Getuid() == 0 {
		theirs := filepath.Join(base, "theirs")
		os.Mkdir(theirs, 0o700)
		if err := os.Chown(theirs, 4242, 4242); err != nil {
			t.Fatal(err)
		}
		if err := open(theirs); err == nil || !strings.Contains(err.Error(), "belongs to uid 4242, not to you") {
			t.Errorf("another user's dir: %v", err)
		}
	} else {
		t.Log("not root: cannot make a directory of another user's to check that it is refused")
	}
	// A pre-made link where the file goes: not followed, nothing written
	// through it.
	dir := filepath.Join(base, "mine")
	os.Mkdir(dir, 0o700)
	victim := filepath.Join(base, "victim")
	os.WriteFile(victim, []byte("keep\n"), 0o600)
	os.Symlink(victim, SystemLogPath(dir, "j", "client"))
	t.Setenv(EnvSystemLogDir, dir)
	l, c, err := SystemLogger("j", "client")
	if err != nil {
		t.Fatal(err)
	}
	var said strings.Builder
	c.(*lazyFile).errOut = &said
	l.Error().Msg("through the link?")
	c.Close()
	if b, _ := os.ReadFile(victim); string(b) != "keep\n" {
		t.Errorf("wrote through a link: %q", b)
	}
	if !strings.Contains(said.String(), "is a symbolic link") {
		t.Errorf("not reported: %q", said.String())
	}
}

func TestPruneSystemLogs(t *testing.T) {
	dir := t.TempDir()
	now := time.Now()
	old := now.Add(-SystemLogRetention - time.Hour)
	files := map[string]time.Time{
		"monarch_j1_client.log":       old, // ended, old: removed
		"monarch_j1_agent-h0.log":     old, // likewise
		"monarch_run_ning_client.log": old, // old, but its job runs: kept
		"monarch_j2_client.log":       now, // recent: kept
		"notes.txt":                   old, // not a system log: kept
	}
	for name, mt := range files {
		p := filepath.Join(dir, name)
		os.WriteFile(p, nil, 0o600)
		os.Chtimes(p, mt, mt)
	}
	running := func(job string) bool { return job == "run_ning" }
	n, err := PruneSystemLogs(dir, now, running)
	if err != nil || n != 2 {
		t.Fatalf("pruned %d, %v; want 2", n, err)
	}
	for name := range files {
		_, err := os.Stat(filepath.Join(dir, name))
		if gone := os.IsNotExist(err); gone != strings.HasPrefix(name, "monarch_j1_") {
			t.Errorf("%s: gone %v", name, gone)
		}
	}
	// Once an hour at most: a new old file waits for the next round.
	p := filepath.Join(dir, "monarch_j3_client.log")
	os.WriteFile(p, nil, 0o600)
	os.Chtimes(p, old, old)
	if n, _ := PruneSystemLogs(dir, now.Add(time.Minute), running); n != 0 {
		t.Errorf("pruned %d within the hour", n)
	}
	if n, _ := PruneSystemLogs(dir, now.Add(2*time.Hour), running); n != 1 {
		t.Errorf("pruned %d an hour later, want 1", n)
	}
	if n, err := PruneSystemLogs(filepath.Join(dir, "missing"), now, running); n != 0 || err != nil {
		t.Errorf("missing dir: %d, %v", n, err)
	}
}

func TestSystemLogJob(t *testing.T) {
	for name, want := range map[string]string{
		"monarch_j1_client.log":       "j1",
		"monarch_tab-j1_proc-c-3.log": "tab-j1",
		"monarch_a_b_agent-h0.log":    "a_b",
		"monarch__client.log":         "",
		"monarch_j1.log":              "",
		"other_j1_client.log":         "",
		"monarch_j1_client.log.1":     "",
	} {
		got, ok := SystemLogJob(name)
		if got != want || ok != (want != "") {
			t.Errorf("%s: %q %v, want %q", name, got, ok, want)
		}
	}
}

// The job's log refuses a dir that is a link, as the system log does.
func TestWriterRefusesLinkedDir(t *testing.T) {
	base := t.TempDir()
	os.Mkdir(filepath.Join(base, "real"), 0o700)
	link := filepath.Join(base, "jobs")
	os.Symlink(filepath.Join(base, "real"), link)
	if _, err := NewWriter(link, "j", 0); err == nil || !strings.Contains(err.Error(), "symbolic link") {
		t.Fatalf("NewWriter through a link: %v", err)
	}
	if entries, _ := os.ReadDir(filepath.Join(base, "real")); len(entries) != 0 {
		t.Fatalf("wrote through the link: %v", entries)
	}
}
