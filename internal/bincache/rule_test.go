package bincache

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/monarch-go/monarch/internal/testcluster"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testcluster.StopIfStarted()
	os.Exit(code)
}

// tree is a folder of this test's that the test cluster's other user can
// reach, as another user of a node reaches /home/alice: a place to build
// files and folders of both users in.
type tree struct {
	c    *testcluster.Cluster
	root string
	pub  string // root's, mode 1777: as /tmp is
}

func newTree(t *testing.T) *tree {
	t.Helper()
	c := testcluster.Get(t)
	root := t.TempDir() // removed as root, whatever the other user left in it
	for _, d := range []string{filepath.Dir(root), root} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	tr := &tree{c: c, root: root, pub: filepath.Join(root, "pub")}
	tr.dir(t, "pub", 0o1777)
	return tr
}

// dir makes a folder of this user's at rel, with mode (chmod's: 01777 is
// sticky).
func (tr *tree) dir(t *testing.T, rel string, mode uint32) string {
	t.Helper()
	p := filepath.Join(tr.root, rel)
	if err := os.MkdirAll(p, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
	return p
}

// file writes a file of this user's at rel, mode 0755.
func (tr *tree) file(t *testing.T, rel, content string) string {
	t.Helper()
	p := filepath.Join(tr.root, rel)
	if err := os.WriteFile(p, []byte(content), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// asOther runs a shell script as the other user, here, with args.
func (tr *tree) asOther(t *testing.T, script string, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := tr.c.AsOther(ctx, "", "sh", append([]string{"-c", "umask 0; set -e; " + script, "sh"}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("as %s: %s: %v: %s", tr.c.Other.Name, script, err, out)
	}
}

// theirs is how the rule names a file of the other user's.
func (tr *tree) theirs(p string) string {
	return p + " belongs to " + tr.c.Other.Name + " (uid " + strconv.Itoa(tr.c.Other.UID) + "), not to you (uid 0) or root"
}

// TestRule: a file at a binary's path is taken (copied into the cache)
// only when it and every folder above it are this user's or root's and
// writable by no one else, but under a folder of root's with the sticky
// bit; and the agent's check (Safe) says the same as the hosts' scripts,
// in the same words. Files and folders of the other user's are made by
// that user.
func TestRule(t *testing.T) {
	tr := newTree(t)
	const content = "#!/bin/sh\necho the job's program\n"
	for _, tt := range []struct {
		name string
		make func(t *testing.T) string // the path the job names
		why  func(path string) string  // "": taken
	}{
		{"a folder of ours", func(t *testing.T) string {
			tr.dir(t, "ours", 0o755)
			return tr.file(t, "ours/prog", content)
		}, nil},
		{"in /tmp (root's, sticky)", func(t *testing.T) string {
			return tr.file(t, "pub/prog", content)
		}, nil},
		{"in a folder of ours in /tmp", func(t *testing.T) string {
			tr.dir(t, "pub/mine", 0o700)
			return tr.file(t, "pub/mine/prog", content)
		}, nil},
		{"a link to a file of ours", func(t *testing.T) string {
			tr.dir(t, "links", 0o755)
			target := tr.file(t, "links/prog.real", content)
			link := filepath.Join(tr.root, "links/prog")
			os.Symlink(target, link)
			return link
		}, nil},
		{"planted by the other user", func(t *testing.T) string {
			p := filepath.Join(tr.pub, "planted/prog")
			tr.asOther(t, `mkdir -m 755 "$(dirname "$1")"; printf '%s' "$2" >"$1"; chmod 755 "$1"`, p, content)
			return p
		}, func(p string) string { return tr.theirs(p) }},
		{"ours, in a folder of the other user's", func(t *testing.T) string {
			d := filepath.Join(tr.pub, "theirs")
			tr.asOther(t, `mkdir -m 755 "$1"`, d)
			return tr.file(t, "pub/theirs/prog", content)
		}, func(p string) string { return tr.theirs(filepath.Dir(p)) }},
		{"a sticky folder of the other user's", func(t *testing.T) string {
			d := filepath.Join(tr.pub, "sticky")
			tr.asOther(t, `mkdir -m 1777 "$1"`, d)
			return tr.file(t, "pub/sticky/prog", content)
		}, func(p string) string { return tr.theirs(filepath.Dir(p)) }},
		{"a group-writable folder", func(t *testing.T) string {
			tr.dir(t, "group", 0o775)
			return tr.file(t, "group/prog", content)
		}, func(p string) string { return filepath.Dir(p) + " is writable by others (mode 0775)" }},
		{"a folder anyone may write, not sticky", func(t *testing.T) string {
			tr.dir(t, "open", 0o777)
			return tr.file(t, "open/prog", content)
		}, func(p string) string { return filepath.Dir(p) + " is writable by others (mode 0777)" }},
		{"a file anyone may write", func(t *testing.T) string {
			tr.dir(t, "wfile", 0o755)
			p := tr.file(t, "wfile/prog", content)
			os.Chmod(p, 0o777)
			return p
		}, func(p string) string { return p + " is writable by others (mode 0777)" }},
		{"a link into a folder of the other user's", func(t *testing.T) string {
			target := filepath.Join(tr.pub, "trap/prog")
			tr.asOther(t, `mkdir -m 755 "$(dirname "$1")"; printf '%s' "$2" >"$1"; chmod 755 "$1"`, target, content)
			tr.dir(t, "mylinks", 0o755)
			link := filepath.Join(tr.root, "mylinks/prog")
			os.Symlink(target, link)
			return link
		}, func(string) string { return tr.theirs(filepath.Join(tr.pub, "trap/prog")) }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			path := tt.make(t)
			b, err := Open(path)
			if err != nil {
				t.Fatal(err)
			}
			cache := filepath.Join(t.TempDir(), "cache")
			rs := run(t, CheckArgv(cache, ModeAuto, []Binary{b}, []string{path}), "")
			_, goErr := Safe(path)
			if tt.why == nil {
				if words(rs) != "dir copied" || goErr != nil {
					t.Fatalf("not taken: hosts %+v; agent %v", rs, goErr)
				}
				checkEntry(t, cache, b)
				return
			}
			why := tt.why(path)
			if words(rs) != "dir untrusted need" || rs[1].Rest != why {
				t.Errorf("hosts: %+v, want untrusted: %s", rs, why)
			}
			if !errors.Is(goErr, ErrUnsafe) || !strings.HasSuffix(goErr.Error(), ": "+why) {
				t.Errorf("agent: %v, want: %s", goErr, why)
			}
			if _, err := os.Stat(Entry(cache, b)); err == nil {
				t.Error("taken into the cache all the same")
			}
		})
	}
}

// TestCacheRule: a cache dir that breaks the rule, or a folder above it,
// stops every script before it reads or writes anything there; an entry
// that breaks it is refused and removed, and the binary is needed.
func TestCacheRule(t *testing.T) {
	tr := newTree(t)
	src := tr.dir(t, "src", 0o755)
	prog := binary(t, src, "prog", "the job's program")
	for _, tt := range []struct {
		name string
		make func(t *testing.T) string // the cache dir
		why  func(cache string) string
	}{
		{"the other user's", func(t *testing.T) string {
			c := filepath.Join(tr.pub, "theirs")
			tr.asOther(t, `mkdir -m 755 "$1"`, c)
			return c
		}, func(c string) string { return tr.theirs(c) }},
		{"anyone may write it", func(t *testing.T) string {
			return tr.dir(t, "open", 0o777)
		}, func(c string) string { return c + " is writable by others (mode 0777)" }},
		{"/tmp itself", func(t *testing.T) string { return tr.pub },
			func(c string) string { return c + " is writable by others (mode 1777)" }},
		{"a folder above anyone may write", func(t *testing.T) string {
			tr.dir(t, "above", 0o777)
			return tr.dir(t, "above/cache", 0o700)
		}, func(c string) string { return filepath.Dir(c) + " is writable by others (mode 0777)" }},
		{"made in a folder of the other user's", func(t *testing.T) string {
			d := filepath.Join(tr.pub, "made")
			tr.asOther(t, `mkdir -m 777 "$1"`, d)
			return filepath.Join(d, "new/cache")
		}, func(c string) string { return tr.theirs(filepath.Dir(filepath.Dir(c))) }},
		{"a link into a folder of the other user's", func(t *testing.T) string {
			d := filepath.Join(tr.pub, "lured")
			tr.asOther(t, `mkdir -m 755 "$1"`, d)
			tr.dir(t, "home", 0o755)
			link := filepath.Join(tr.root, "home/cache")
			os.Symlink(d, link)
			return link
		}, func(string) string { return tr.theirs(filepath.Join(tr.pub, "lured")) }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cache := tt.make(t)
			why := tt.why(cache)
			data, _ := os.ReadFile(prog.Path)
			for what, argv := range map[string][]string{
				"check":   CheckArgv(cache, ModeAuto, []Binary{prog}, []string{prog.Path}),
				"receive": ReceiveArgv(cache, 0, prog),
				"settle":  SettleArgv(cache, "1", []Binary{prog}),
			} {
				rs := run(t, argv, string(data))
				if len(rs) != 1 || rs[0].Word != "unsafe" || rs[0].Index != -1 || rs[0].Rest != why {
					t.Errorf("%s: %+v, want unsafe: %s", what, rs, why)
				}
			}
			if _, err := os.Stat(filepath.Dir(Entry(cache, prog))); err == nil {
				t.Error("an entry was made")
			}
		})
	}

	// Entries that break it in a cache that keeps it: refused, removed,
	// needed again (sent, or copied from the path).
	cache := tr.dir(t, "cache", 0o700)
	copied := func(t *testing.T, want string) {
		t.Helper()
		rs := run(t, CheckArgv(cache, ModeAuto, []Binary{prog}, []string{prog.Path}), "")
		if words(rs) != "dir unsafe copied" || rs[1].Rest != want {
			t.Fatalf("%+v, want unsafe: %s", rs, want)
		}
		checkEntry(t, cache, prog)
	}
	run(t, CheckArgv(cache, ModeAuto, []Binary{prog}, []string{prog.Path}), "")
	e := Entry(cache, prog)
	os.Chmod(e, 0o777)
	copied(t, e+" is writable by others (mode 0777)")
	os.Chown(e, tr.c.Other.UID, tr.c.Other.GID)
	copied(t, tr.theirs(e))
	os.Chown(filepath.Dir(e), tr.c.Other.UID, tr.c.Other.GID)
	copied(t, tr.theirs(filepath.Dir(e)))
	syscall.Chmod(filepath.Dir(e), 0o1777) // root's and sticky: others could add to it
	copied(t, filepath.Dir(e)+" is writable by others (mode 1777)")
	os.Remove(e)
	os.Symlink(prog.Path, e)
	copied(t, e+" is a symbolic link")
}
