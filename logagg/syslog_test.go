package logagg

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
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

// A squatted system log folder (a symbolic link, another user's folder,
// one others can write, one in a folder of another user's) does not stop
// the process: its logs go to a fresh private folder beside it, said once
// with the reason, and nothing is written in or through the squatted one.
func TestSystemLogStepsAroundSquattedDir(t *testing.T) {
	base := t.TempDir()
	target := filepath.Join(base, "elsewhere")
	os.Mkdir(target, 0o700)
	link := filepath.Join(base, "link")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	open := filepath.Join(base, "open")
	os.Mkdir(open, 0o700)
	os.Chmod(open, 0o777)
	// Where the fresh folder goes: beside the squatted one, unless its
	// folder is no safer (then in $TMPDIR).
	type squat struct{ name, dir, why, in string }
	cases := []squat{
		{"symlink", link, link + " is a symbolic link", base},
		{"world-writable", open, "writable by other users", base},
	}
	if os.Getuid() == 0 {
		theirs := filepath.Join(base, "theirs")
		os.Mkdir(theirs, 0o700)
		above := filepath.Join(base, "above")
		os.Mkdir(above, 0o755)
		for _, d := range []string{theirs, above} {
			if err := os.Chown(d, 4242, 4242); err != nil {
				t.Fatal(err)
			}
		}
		cases = append(cases, squat{"another user's", theirs, "belongs to uid 4242, not to you", base},
			squat{"in another user's folder", filepath.Join(above, "logs"), above + ", above " + filepath.Join(above, "logs") + ", belongs to uid 4242", os.TempDir()})
	} else {
		t.Log("not root: cannot make folders of another user's to check that they are stepped around")
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(EnvSystemLogDir, tc.dir)
			var said strings.Builder
			dir, err := UseSystemLogDir(&said)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.RemoveAll(dir) })
			if !strings.HasPrefix(dir, filepath.Join(tc.in, filepath.Base(tc.dir)+".")) || os.Getenv(EnvSystemLogDir) != dir {
				t.Errorf("logs go to %s ($%s %s), want a fresh folder in %s", dir, EnvSystemLogDir, os.Getenv(EnvSystemLogDir), tc.in)
			}
			if fi, err := os.Lstat(dir); err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o700 {
				t.Errorf("fresh folder %s: %v, %v", dir, fi, err)
			}
			line := said.String()
			if strings.Count(line, "\n") != 1 || !strings.Contains(line, "system logs on ") || !strings.Contains(line, " go to "+dir+" instead: ") || !strings.Contains(line, tc.why) {
				t.Errorf("said %q, want one line naming %s and why (%s)", line, dir, tc.why)
			}
			// The process's loggers, and its children, use it silently.
			said.Reset()
			if again, err := UseSystemLogDir(&said); again != dir || err != nil || said.Len() > 0 {
				t.Errorf("again: %s, %v, said %q", again, err, said.String())
			}
			l, c, err := SystemLogger("j", "client")
			if err != nil {
				t.Fatal(err)
			}
			l.Error().Msg("logged")
			c.Close()
			if b, err := os.ReadFile(SystemLogPath(dir, "j", "client")); err != nil || !strings.Contains(string(b), "logged") {
				t.Errorf("the log in the fresh folder: %q, %v", b, err)
			}
			for _, d := range []string{tc.dir, target} {
				if entries, _ := os.ReadDir(d); len(entries) != 0 {
					t.Errorf("wrote in %s: %v", d, entries)
				}
			}
		})
	}
}

// A folder squatted after the logger chose it, before its first message
// (missing then, another user's now), is stepped around as well.
func TestSystemLogSquattedLater(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("not root: cannot make a folder of another user's")
	}
	dir := filepath.Join(t.TempDir(), "logs")
	t.Setenv(EnvSystemLogDir, dir)
	l, c, said := loggerSaying(t)
	os.Mkdir(dir, 0o700)
	os.Chown(dir, 4242, 4242)
	l.Error().Msg("logged")
	c.Close()
	fresh := os.Getenv(EnvSystemLogDir)
	if b, err := os.ReadFile(SystemLogPath(fresh, "j", "client")); fresh == dir || err != nil || !strings.Contains(string(b), "logged") {
		t.Errorf("the log in %s: %q, %v", fresh, b, err)
	}
	if !strings.Contains(said.String(), "go to "+fresh+" instead: ") || !strings.Contains(said.String(), "belongs to uid 4242") {
		t.Errorf("said %q", said.String())
	}
}

// loggerSaying opens job j's client's system log, and returns what its
// file says of itself (where it went, why not) with it.
func loggerSaying(t *testing.T) (zerolog.Logger, io.Closer, *strings.Builder) {
	t.Helper()
	l, c, err := SystemLogger("j", "client")
	if err != nil {
		t.Fatal(err)
	}
	said := &strings.Builder{}
	c.(*lazyFile).errOut = said
	return l, c, said
}

// A link planted where the file goes, in the user's own folder, is not
// followed: nothing is written through it, and it is said.
func TestSystemLogFileLink(t *testing.T) {
	base := t.TempDir()
	dir := filepath.Join(base, "mine")
	os.Mkdir(dir, 0o700)
	victim := filepath.Join(base, "victim")
	os.WriteFile(victim, []byte("keep\n"), 0o600)
	os.Symlink(victim, SystemLogPath(dir, "j", "client"))
	t.Setenv(EnvSystemLogDir, dir)
	l, c, said := loggerSaying(t)
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
