package bincache

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// run runs a host script here, with stdin, and returns its answers.
func run(t *testing.T, argv []string, stdin string) []Reply {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%v: %v", argv[:2], err)
	}
	var rs []Reply
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		r, ok := Parse(l)
		if !ok {
			t.Fatalf("not an answer: %q", l)
		}
		rs = append(rs, r)
	}
	return rs
}

func words(rs []Reply) string {
	var w []string
	for _, r := range rs {
		w = append(w, r.Word)
	}
	return strings.Join(w, " ")
}

func binary(t *testing.T, dir, name, content string) Binary {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o755); err != nil {
		t.Fatal(err)
	}
	b, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestScripts runs the host's side here, with sh: check, receive, settle
// and what each answers.
func TestScripts(t *testing.T) {
	src, cache := t.TempDir(), filepath.Join(t.TempDir(), "cache")
	prog := binary(t, src, "prog", "#!/bin/sh\necho hello\n")
	mon := binary(t, src, "monarch", "monarch v1")
	bins, paths := []Binary{mon, prog}, []string{mon.Path, "/nonexistent/prog"}

	// auto: monarch is at its path, in folders of this user's: copied
	// into the cache; the program is nowhere.
	rs := run(t, CheckArgv(cache, ModeAuto, bins, paths), "")
	if got := words(rs); got != "dir copied need" {
		t.Fatalf("check: %s (%+v)", got, rs)
	}
	if rs[0].Rest != cache {
		t.Errorf("dir %q, want %q", rs[0].Rest, cache)
	}
	if rs[1].Rest != Entry(cache, mon) {
		t.Errorf("monarch copied to %q, want %q", rs[1].Rest, Entry(cache, mon))
	}
	checkEntry(t, cache, mon)
	if got := words(run(t, CheckArgv(cache, ModeAuto, bins, paths), "")); got != "dir have need" {
		t.Fatalf("check after the copy: %s", got)
	}
	// Elsewhere, the same size but not the same content: it differs, and
	// its copy is not kept.
	os.RemoveAll(cache)
	other := filepath.Join(src, "monarch-elsewhere")
	if err := os.WriteFile(other, []byte("monarch v2"), 0o755); err != nil {
		t.Fatal(err)
	}
	rs = run(t, CheckArgv(cache, ModeAuto, []Binary{mon}, []string{other}), "")
	if words(rs) != "dir differs need" || !strings.HasPrefix(rs[1].Rest, "sha256 ") {
		t.Fatalf("changed: %+v", rs)
	}
	if left, _ := os.ReadDir(filepath.Dir(Entry(cache, mon))); len(left) != 0 {
		t.Errorf("left after a copy that differs: %v", left)
	}
	os.WriteFile(other, []byte("monarch v2, longer"), 0o755)
	rs = run(t, CheckArgv(cache, ModeAuto, []Binary{mon}, []string{other}), "")
	if words(rs) != "dir differs need" || rs[1].Rest != "size 18" {
		t.Fatalf("another size: %+v", rs)
	}
	os.RemoveAll(cache)
	// always: both sent.
	if got := words(run(t, CheckArgv(cache, ModeAlways, bins, paths), "")); got != "dir need need" {
		t.Fatalf("check always: %s", got)
	}
	data, _ := os.ReadFile(prog.Path)
	rs = run(t, ReceiveArgv(cache, 1, prog), string(data))
	if len(rs) != 1 || rs[0].Word != "ok" || rs[0].Index != 1 || rs[0].Rest != Entry(cache, prog) {
		t.Fatalf("receive: %+v", rs)
	}
	checkEntry(t, cache, prog)
	if out, err := exec.Command(Entry(cache, prog)).Output(); err != nil || string(out) != "hello\n" {
		t.Errorf("cached program: %q, %v", out, err)
	}
	rs = run(t, CheckArgv(cache, ModeAuto, bins, paths), "")
	if got := words(rs); got != "dir copied have" || rs[2].Rest != Entry(cache, prog) {
		t.Fatalf("check after: %s (%+v)", got, rs)
	}

	// A receive whose bytes are not the sum's is refused: nothing stays.
	os.RemoveAll(filepath.Dir(Entry(cache, mon)))
	rs = run(t, ReceiveArgv(cache, 0, mon), "monarch v2")
	if len(rs) != 1 || rs[0].Word != "bad" || !strings.HasSuffix(rs[0].Rest, " 10") {
		t.Fatalf("bad receive: %+v", rs)
	}
	if left, _ := os.ReadDir(filepath.Dir(Entry(cache, mon))); len(left) != 0 {
		t.Errorf("left after a refused arrival: %v", left)
	}

	// A cached copy gone bad is refused and removed.
	os.Chmod(Entry(cache, prog), 0o700)
	if err := os.WriteFile(Entry(cache, prog), []byte("garbage"), 0o700); err != nil {
		t.Fatal(err)
	}
	if got := words(run(t, CheckArgv(cache, ModeAuto, bins, paths), "")); got != "dir copied bad need" {
		t.Fatalf("check of a bad entry: %s", got)
	}
	if _, err := os.Stat(Entry(cache, prog)); err == nil {
		t.Error("a bad entry stayed")
	}

	// Settle: a part (as sbcast leaves it) moves into place; a wrong one
	// is refused; a missing one with a good entry is fine.
	part := Part(cache, prog, "7")
	if err := os.WriteFile(part, data, 0o600); err != nil {
		t.Fatal(err)
	}
	os.RemoveAll(filepath.Dir(Entry(cache, mon)))
	os.MkdirAll(filepath.Dir(Entry(cache, mon)), 0o700)
	badPart := Part(cache, mon, "7")
	if err := os.WriteFile(badPart, []byte("truncated"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := words(run(t, SettleArgv(cache, "7", []Binary{prog, mon}), "")); got != "ok bad" {
		t.Fatalf("settle: %s", got)
	}
	if got := words(run(t, SettleArgv(cache, "7", []Binary{prog, mon}), "")); got != "ok missing" {
		t.Fatalf("settle again: %s", got)
	}
}

// checkEntry checks b's entry in cache: b's bytes, mode 0500, in a 0700
// directory.
func checkEntry(t *testing.T, cache string, b Binary) {
	t.Helper()
	e := Entry(cache, b)
	got, err := Open(e)
	if err != nil || got.Sum != b.Sum {
		t.Fatalf("entry %s: %v, sha256 %s, want %s", e, err, got.Sum, b.Sum)
	}
	if fi, _ := os.Stat(e); fi.Mode().Perm() != 0o500 {
		t.Errorf("entry mode %v", fi.Mode())
	}
	if di, _ := os.Stat(filepath.Dir(e)); di.Mode().Perm() != 0o700 {
		t.Errorf("entry dir mode %v", di.Mode())
	}
}

// TestReceiveFails: what the host says when the entry cannot be written
// reaches the answer.
func TestReceiveFails(t *testing.T) {
	src, cache := t.TempDir(), t.TempDir()
	prog := binary(t, src, "prog", "x")
	prog.Name = strings.Repeat("n", 250) // its part's name is too long
	rs := run(t, ReceiveArgv(cache, 0, prog), "x")
	if len(rs) != 1 || rs[0].Word != "fail" || !strings.Contains(rs[0].Rest, "File name too long") {
		t.Fatalf("%+v", rs)
	}
}

func TestParse(t *testing.T) {
	for _, tt := range []struct {
		line string
		want Reply
		ok   bool
	}{
		{"monarch-ship h1 have 0 /c/ab/prog", Reply{Host: "h1", Word: "have", Index: 0, Rest: "/c/ab/prog"}, true},
		{"monarch-ship h1 dir - /home/u/.cache/monarch/bin", Reply{Host: "h1", Word: "dir", Index: -1, Rest: "/home/u/.cache/monarch/bin"}, true},
		{"monarch-ship h2 fail 1 cat: write error: No space left on device\r\n", Reply{Host: "h2", Word: "fail", Index: 1, Rest: "cat: write error: No space left on device"}, true},
		{"monarch-ship h2 need 1 ", Reply{Host: "h2", Word: "need", Index: 1}, true},
		{"srun: error: h1: task 0: Exited", Reply{}, false},
		{"monarch-ship h1 need x", Reply{}, false},
		{"monarch-ship h1 need -2", Reply{}, false},
	} {
		got, ok := Parse(tt.line)
		if ok != tt.ok || got != tt.want {
			t.Errorf("Parse(%q) = %+v, %v; want %+v, %v", tt.line, got, ok, tt.want, tt.ok)
		}
	}
}

// TestPrune: entries used lately and entries a process runs stay; old
// ones and stale parts go; what is not an entry is left alone.
func TestPrune(t *testing.T) {
	cache, src := t.TempDir(), t.TempDir()
	now := time.Now()
	old := now.Add(-30 * 24 * time.Hour)
	mk := func(content string, used time.Time) Binary {
		b := binary(t, src, "bin", content)
		d := filepath.Dir(Entry(cache, b))
		os.MkdirAll(d, 0o700)
		data, _ := os.ReadFile(b.Path)
		os.WriteFile(Entry(cache, b), data, 0o500)
		os.Chtimes(d, used, used)
		return b
	}
	stale := mk("old", old)
	recent := mk("recent", now.Add(-time.Hour))
	// A running process executing an old entry: a copy of sleep.
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Skip("no sleep")
	}
	running := mk("placeholder", old)
	data, _ := os.ReadFile(sleep)
	e := Entry(cache, running)
	os.Chmod(e, 0o700)
	if err := os.WriteFile(e, data, 0o700); err != nil {
		t.Fatal(err)
	}
	os.Chtimes(filepath.Dir(e), old, old)
	cmd := exec.Command(e, "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	oldPart := Part(cache, recent, "1")
	os.WriteFile(oldPart, []byte("x"), 0o600)
	os.Chtimes(oldPart, old, old)
	newPart := Part(cache, recent, "2")
	os.WriteFile(newPart, []byte("x"), 0o600)
	other := filepath.Join(cache, "notes")
	os.WriteFile(other, []byte("mine"), 0o600)

	p, err := Prune(cache, DefaultKeep, now)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Removed) != 1 || filepath.Base(p.Removed[0]) != stale.Sum || p.Bytes != 3 || p.InUse != 1 || p.Recent != 1 {
		t.Errorf("pruned %+v", p)
	}
	for path, want := range map[string]bool{Entry(cache, stale): false, Entry(cache, recent): true, e: true,
		oldPart: false, newPart: true, other: true} {
		if _, err := os.Stat(path); (err == nil) != want {
			t.Errorf("%s: exists %v, want %v", path, err == nil, want)
		}
	}
	if p, err := Prune(filepath.Join(cache, "nosuch"), 0, now); err != nil || len(p.Removed) != 0 {
		t.Errorf("missing dir: %+v, %v", p, err)
	}
}

// FuzzParse: any line is an answer or not, never a panic; an answer's
// index is -1 or a count.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"monarch-ship h1 have 0 /c/ab/prog", "monarch-ship h1 dir - /c", "monarch-ship h2 unsafe - /c is writable by others (mode 0777)",
		"monarch-ship h2 untrusted 1 /tmp/x/train belongs to other (uid 999), not to you (uid 0) or root", "monarch-ship h1 copied 0 /c/ab/prog",
		"monarch-ship h1 notool - no stat in PATH (/bin)", "monarch-ship h1 need 99999999999999999999", "monarch-ship h1 need -1", "monarch-ship"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		r, ok := Parse(line)
		if ok && (r.Index < -1 || !strings.HasPrefix(line, Prefix+" ")) {
			t.Fatalf("%q: %+v", line, r)
		}
	})
}
