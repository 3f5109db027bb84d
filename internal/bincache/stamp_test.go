package bincache

import (
	"context"
	"crypto/rand"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/monarch-go/monarch/internal/testcluster"
)

// readBy runs a host script here as run does, and also returns how many
// bytes it and every process it started read (rchar of a shell that
// waited for them all: the kernel adds a reaped child's reads to its
// parent's).
func readBy(t *testing.T, argv []string, stdin string) ([]Reply, int64) {
	t.Helper()
	rs := run(t, append([]string{"sh", "-c", `"$@"; echo "` + Prefix + ` rchar $(sed -n 's/^rchar: //p' /proc/$$/io) -"`, "sh"}, argv...), stdin)
	last := rs[len(rs)-1]
	n, err := strconv.ParseInt(last.Word, 10, 64)
	if last.Host != "rchar" || err != nil {
		t.Fatalf("no read count: %+v", last)
	}
	return rs[:len(rs)-1], n
}

// ownReads is how many bytes this process has read so far.
func ownReads(t *testing.T) int64 {
	t.Helper()
	data, err := os.ReadFile("/proc/self/io")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(l, "rchar: "); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatal("no rchar in /proc/self/io")
	return 0
}

func randomBinary(t *testing.T, dir, name string, size int) Binary {
	t.Helper()
	data := make([]byte, size)
	rand.Read(data)
	return binary(t, dir, name, string(data))
}

// stampOf is the stamp line of path as it is now, as the scripts' look
// writes it (TestStampLine holds the two alike).
func stampOf(t *testing.T, path string) string {
	t.Helper()
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	line, ok := stampLine(fi.Sys().(*syscall.Stat_t))
	if !ok {
		t.Fatalf("%s: no stamp line (times in whole seconds?)", path)
	}
	return line
}

// TestStampSpares: a copy in the cache is read and hashed the first time
// it is used without a stamp, and then not read again, however it
// arrived (copied from its path, received over ssh, settled after
// sbcast); the agent's OpenProgram does not read it either. The proof is
// the kernel's count of bytes read by the script and every tool it ran,
// and by this process.
func TestStampSpares(t *testing.T) {
	const size = 4 << 20
	for _, how := range []string{"copied", "received", "settled"} {
		t.Run(how, func(t *testing.T) {
			src, cache := t.TempDir(), filepath.Join(t.TempDir(), "cache")
			b := randomBinary(t, src, "prog", size)
			e := Entry(cache, b)
			data, _ := os.ReadFile(b.Path)
			switch how {
			case "copied":
				if got := words(run(t, CheckArgv(cache, ModeAuto, []Binary{b}, []string{b.Path}), "")); got != "dir copied" {
					t.Fatalf("check: %s", got)
				}
			case "received":
				if got := words(run(t, ReceiveArgv(cache, 0, b), string(data))); got != "ok" {
					t.Fatalf("receive: %s", got)
				}
			case "settled":
				if got := words(run(t, CheckArgv(cache, ModeAlways, []Binary{b}, []string{b.Path}), "")); got != "dir need" {
					t.Fatalf("check: %s", got)
				}
				if err := os.WriteFile(Part(cache, b, "7"), data, 0o600); err != nil {
					t.Fatal(err)
				}
				if got := words(run(t, SettleArgv(cache, "7", []Binary{b}), "")); got != "ok" {
					t.Fatalf("settle: %s", got)
				}
			}
			checkEntry(t, cache, b)
			warm := func(t *testing.T) {
				t.Helper()
				for _, mode := range []string{ModeAuto, ModeAlways} {
					rs, n := readBy(t, CheckArgv(cache, mode, []Binary{b}, []string{b.Path}), "")
					if words(rs) != "dir have" || rs[1].Rest != e {
						t.Fatalf("%s: %+v", mode, rs)
					}
					if n >= size/4 {
						t.Errorf("%s: a warm check read %d bytes; the copy is %d", mode, n, size)
					}
				}
				before := ownReads(t)
				p, err := OpenProgram(e, b.Sum)
				if err != nil {
					t.Fatal(err)
				}
				p.Close()
				if n := ownReads(t) - before; n >= size/4 {
					t.Errorf("OpenProgram read %d bytes of a stamped copy of %d", n, size)
				}
			}
			warm(t)
			// Without its stamp (a cache of an earlier monarch), a use
			// hashes the copy, and stamps it.
			if err := os.Remove(StampPath(e)); err != nil {
				t.Fatal(err)
			}
			before := ownReads(t)
			p, err := OpenProgram(e, b.Sum)
			if err != nil {
				t.Fatal(err)
			}
			p.Close()
			if n := ownReads(t) - before; n < size {
				t.Errorf("OpenProgram read %d bytes of an unstamped copy of %d", n, size)
			}
			rs, n := readBy(t, CheckArgv(cache, ModeAlways, []Binary{b}, []string{b.Path}), "")
			if words(rs) != "dir have" || n < size {
				t.Fatalf("unstamped: %+v, read %d bytes of %d", rs, n, size)
			}
			warm(t)
		})
	}
}

// TestStampTrusted: what a stamp vouches for is taken unread, and
// anything that changes the copy or the stamp has it hashed again; the
// hosts' scripts and the agent's OpenProgram agree on each case. The
// proof that a copy is not read: its bytes are made another binary's (of
// the same size and mtime) and its stamp written for what it is then,
// as only the user or root could; a stamped copy is then taken for the
// binary ("have"), and one hashed is refused ("bad", ErrChanged).
func TestStampTrusted(t *testing.T) {
	const size = 64 << 10
	for _, tt := range []struct {
		name   string
		change func(t *testing.T, e string) // e: the entry, stamped
		taken  bool
	}{
		{"as stamped", func(*testing.T, string) {}, true},
		{"touched", func(t *testing.T, e string) { sh(t, `touch "$1"`, e) }, false},
		{"touched, mtime put back", func(t *testing.T, e string) {
			sh(t, `touch -r "$1" "$1.t"; touch "$1"; touch -r "$1.t" "$1"; rm "$1.t"`, e)
		}, false},
		{"rewritten, same bytes, mtime put back", func(t *testing.T, e string) {
			sh(t, `touch -r "$1" "$1.t"; chmod 700 "$1"; cat "$1" >"$1.b"; cat "$1.b" >"$1"; rm "$1.b"; chmod 500 "$1"; touch -r "$1.t" "$1"; rm "$1.t"`, e)
		}, false},
		{"chmod to its own mode", func(t *testing.T, e string) { sh(t, `chmod 500 "$1"`, e) }, false},
		{"replaced, same bytes, size and mtime", func(t *testing.T, e string) {
			sh(t, `cp -p "$1" "$1.new"; mv -f "$1.new" "$1"`, e)
		}, false},
		{"linked", func(t *testing.T, e string) { sh(t, `ln "$1" "$1.2"`, e) }, false},
		{"no stamp", func(t *testing.T, e string) { os.Remove(StampPath(e)) }, false},
		{"its stamp garbage", func(t *testing.T, e string) { writeStamp(t, e, "garbage\n") }, false},
		{"its stamp of another form", func(t *testing.T, e string) { writeStamp(t, e, "v2 "+stampOf(t, e)+"\n") }, false},
		{"its stamp with a line after", func(t *testing.T, e string) { writeStamp(t, e, "v1 "+stampOf(t, e)+"\nmore\n") }, false},
		{"its stamp with a newline more", func(t *testing.T, e string) { writeStamp(t, e, "v1 "+stampOf(t, e)+"\n\n") }, false},
		{"its stamp without its newline", func(t *testing.T, e string) { writeStamp(t, e, "v1 "+stampOf(t, e)) }, false},
		{"its stamp with a space more", func(t *testing.T, e string) { writeStamp(t, e, "v1 "+stampOf(t, e)+" \n") }, false},
		{"its stamp another file's", func(t *testing.T, e string) { writeStamp(t, e, "v1 "+stampOf(t, filepath.Dir(e))+"\n") }, false},
		{"its stamp long", func(t *testing.T, e string) {
			writeStamp(t, e, "v1 "+stampOf(t, e)+strings.Repeat(" ", stampMax)+"\n")
		}, false},
		{"its stamp writable by others", func(t *testing.T, e string) { os.Chmod(StampPath(e), 0o666) }, false},
		{"its stamp a link to a good one", func(t *testing.T, e string) {
			good := filepath.Join(filepath.Dir(e), "good")
			os.Rename(StampPath(e), good)
			os.Symlink(good, StampPath(e))
		}, false},
		{"its stamp a fifo", func(t *testing.T, e string) {
			os.Remove(StampPath(e))
			if err := syscall.Mkfifo(StampPath(e), 0o600); err != nil {
				t.Fatal(err)
			}
		}, false},
		{"its stamp a folder", func(t *testing.T, e string) {
			os.Remove(StampPath(e))
			os.Mkdir(StampPath(e), 0o700)
		}, false},
		{"its stamp the other user's", func(t *testing.T, e string) {
			c := testcluster.Get(t)
			if err := os.Chown(StampPath(e), c.Other.UID, c.Other.GID); err != nil {
				t.Fatal(err)
			}
		}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			src, cache := t.TempDir(), filepath.Join(t.TempDir(), "cache")
			b := randomBinary(t, src, "prog", size)
			other := randomBinary(t, src, "other", size)
			if got := words(run(t, CheckArgv(cache, ModeAuto, []Binary{b}, []string{b.Path}), "")); got != "dir copied" {
				t.Fatalf("check: %s", got)
			}
			e := Entry(cache, b)
			// The copy made other's, in place, its mtime put back; its
			// stamp written for what it is now.
			sh(t, `touch -r "$1" "$1.t"; chmod 700 "$1"; cat "$2" >"$1"; chmod 500 "$1"; touch -r "$1.t" "$1"; rm "$1.t"`, e, other.Path)
			writeStamp(t, e, "v1 "+stampOf(t, e)+"\n")
			tt.change(t, e)

			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			done := make(chan error, 1)
			go func() {
				p, err := OpenProgram(e, b.Sum)
				if err == nil {
					p.Close()
				}
				done <- err
			}()
			var goErr error
			select {
			case goErr = <-done:
			case <-ctx.Done():
				t.Fatal("OpenProgram did not return within 10s")
			}
			rs := run(t, CheckArgv(cache, ModeAlways, []Binary{b}, []string{b.Path}), "")
			if tt.taken {
				if words(rs) != "dir have" || goErr != nil {
					t.Fatalf("not taken unread: hosts %+v; agent %v", rs, goErr)
				}
				return
			}
			if words(rs) != "dir bad need" || rs[1].Rest != other.Sum {
				t.Errorf("hosts: %+v, want bad %s (hashed)", rs, other.Sum)
			}
			if !errors.Is(goErr, ErrChanged) {
				t.Errorf("agent: %v, want %v (hashed)", goErr, ErrChanged)
			}
			if _, err := os.Stat(e); err == nil {
				t.Error("the bad copy stayed")
			}
		})
	}
}

// writeStamp writes content as e's stamp, as the user could.
func writeStamp(t *testing.T, e, content string) {
	t.Helper()
	if err := os.WriteFile(StampPath(e), []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// sh runs a shell script with args.
func sh(t *testing.T, script string, args ...string) {
	t.Helper()
	if out, err := exec.Command("sh", append([]string{"-c", "set -e; " + script, "sh"}, args...)...).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v: %s", script, err, out)
	}
}

// TestStampLine: the scripts' look and Go's stampLine write the same line
// of a file; look has none where stat gives no times in nanoseconds, and
// shaped refuses what is not a stamp line.
func TestStampLine(t *testing.T) {
	dir := t.TempDir()
	for _, p := range []string{binary(t, dir, "f", "x").Path, dir, "/"} {
		out, err := exec.Command("sh", "-c", stampFuncs+`look "$1" && printf '%s' "$st"`, "sh", p).Output()
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		if want := stampOf(t, p); string(out) != want {
			t.Errorf("%s: look %q, stampLine %q", p, out, want)
		}
	}
	good := stampOf(t, dir)
	for line, ok := range map[string]bool{
		good: true,
		"65024 9986065 36833541 1796567624.874616803 1796567625.110616801 0 8140":   true,
		"65024 9986065 36833541 1796567624 1796567625 0 8140":                       false, // a stat without %.9Y
		"65024 9986065 36833541 1796567624.000000000 1796567625.000000000 0 8140":   false, // whole seconds
		"65024 9986065 36833541 1796567624.8746168 1796567625.110616801 0 8140":     false,
		"65024 9986065 36833541 -1.874616803 1796567625.110616801 0 8140":           false,
		"65024 9986065 36833541 .874616803 1796567625.110616801 0 8140":             false,
		"65024 9986065 36833541 1.2.874616803 1796567625.110616801 0 8140":          false,
		"65024 9986065 1796567624.874616803 1796567625.110616801 0 8140":            false,
		"65024 9986065 36833541 1796567624.874616803 1796567625.110616801 0 8140 1": false,
		"65024 99x6065 36833541 1796567624.874616803 1796567625.110616801 0 8140":   false,
		"65024 9986065 36833541 1796567624.874616803 1796567625.110616801 0 81z0":   false,
		"?": false, "": false,
		"65024 9986065 36833541 1796567624.874616803 1796567625.110616801 0 8140\n1 2 3 4.000000001 5.000000001 0 8140": false,
	} {
		out, _ := exec.Command("sh", "-c", stampFuncs+`shaped "$1" && echo yes`, "sh", line).Output()
		if got := strings.TrimSpace(string(out)) == "yes"; got != ok {
			t.Errorf("shaped %q: %v, want %v", line, got, ok)
		}
	}
}

// FuzzStamp: whatever a stamp file holds, OpenProgram's check of it
// returns (no panic, no more read than stampMax) and takes it only when
// it is the one line "v1 " and the copy's stamp line, as the scripts'
// fresh does.
func FuzzStamp(f *testing.F) {
	dir := f.TempDir()
	data := []byte("#!/bin/sh\necho hi\n")
	b := Binary{Name: "prog", Sum: "58c9b4f24cba0ec1846a9b6e4ec9c0c0e2d8ca2ff2c27e31a0c3a1fd3e2c0b3e"}
	e := Entry(dir, b)
	if err := os.MkdirAll(filepath.Dir(e), 0o700); err != nil {
		f.Fatal(err)
	}
	if err := os.WriteFile(e, data, 0o500); err != nil {
		f.Fatal(err)
	}
	fi, err := os.Stat(e)
	if err != nil {
		f.Fatal(err)
	}
	line, ok := stampLine(fi.Sys().(*syscall.Stat_t))
	if !ok {
		f.Skip("times in whole seconds here")
	}
	for _, s := range []string{"v1 " + line + "\n", "v1 " + line, "v1 " + line + "\n\n", "v1 " + line + "\r\n", "v1 " + line + "\x00",
		"v2 " + line + "\n", "v1 " + line + " \n", "v1  " + line, "v1 " + line + "\nv1 " + line + "\n", "", "\n", "v1 ",
		"v1 " + line + strings.Repeat("\n", 400), "v1 " + strings.Repeat("9", 1000)} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, content []byte) {
		sp := StampPath(e)
		if err := os.WriteFile(sp, content, 0o600); err != nil {
			t.Fatal(err)
		}
		file, err := os.Open(e)
		if err != nil {
			t.Fatal(err)
		}
		defer file.Close()
		got := stamped(file, e, b.Sum)
		want := string(content) == "v1 "+line+"\n"
		if got != want {
			t.Fatalf("stamp %q: taken %v, want %v", content, got, want)
		}
		if stamped(file, e, strings.Repeat("0", 64)) {
			t.Fatal("taken for another sum")
		}
	})
}
