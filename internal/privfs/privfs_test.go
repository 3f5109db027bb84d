package privfs

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/monarch-go/monarch/internal/testcluster"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testcluster.StopIfStarted()
	os.Exit(code)
}

// needRoot skips a test that makes files of another user's.
func needRoot(t *testing.T) {
	t.Helper()
	if os.Getuid() != 0 {
		t.Skip("not root: cannot make files of another user's")
	}
}

// refused checks that err is ErrUnsafe and says want.
func refused(t *testing.T, what string, err error, want string) {
	t.Helper()
	if !errors.Is(err, ErrUnsafe) || !strings.Contains(err.Error(), want) {
		t.Errorf("%s: %v, want ErrUnsafe saying %q", what, err, want)
	}
}

// A folder above a private dir that another user owns, or that others can
// write without the sticky bit, could have the dir renamed away: Dir and
// CheckDir refuse it, naming it, whether the dir is there yet or not.
func TestFoldersAbove(t *testing.T) {
	needRoot(t)
	base := t.TempDir()
	theirs := filepath.Join(base, "theirs")
	os.Mkdir(theirs, 0o755)
	os.Chown(theirs, 4242, 4242)
	open := filepath.Join(base, "open")
	os.Mkdir(open, 0o777)
	os.Chmod(open, 0o777)
	sticky := filepath.Join(base, "sticky")
	os.Mkdir(sticky, 0o777)
	os.Chmod(sticky, 0o777|os.ModeSticky)
	for _, tc := range []struct{ dir, want string }{
		{filepath.Join(theirs, "ctl"), theirs + ", above " + filepath.Join(theirs, "ctl") + ", belongs to uid 4242"},
		{filepath.Join(theirs, "a", "b"), theirs + ", above " + filepath.Join(theirs, "a", "b") + ", belongs to uid 4242"},
		{filepath.Join(open, "jobs"), open + ", above " + filepath.Join(open, "jobs") + ", is writable by other users (mode 0777) and not sticky"},
	} {
		refused(t, "CheckDir "+tc.dir, CheckDir(tc.dir), tc.want)
		refused(t, "Dir "+tc.dir, Dir(tc.dir), tc.want)
		if _, err := os.Lstat(tc.dir); err == nil {
			t.Errorf("Dir made %s", tc.dir)
		}
	}
	// Made there before (by this user, say, before the folder changed
	// hands): refused all the same.
	mine := filepath.Join(theirs, "mine")
	os.Mkdir(mine, 0o700)
	refused(t, "CheckDir of an existing dir", CheckDir(mine), "belongs to uid 4242")
	// Sticky, as /tmp: no one renames another's entry.
	if err := Dir(filepath.Join(sticky, "logs")); err != nil {
		t.Errorf("in a sticky folder: %v", err)
	}
	// A link on the way is followed for the check: the folders it leads
	// to are checked too.
	link := filepath.Join(base, "link")
	os.Symlink(theirs, link)
	refused(t, "through a link", Dir(filepath.Join(link, "x")), theirs)
}

// Fresh makes a new private dir beside the squatted one, or in TMPDIR when
// the squatted one's folder is no safer; never the same name twice.
func TestFresh(t *testing.T) {
	base := t.TempDir()
	squatted := filepath.Join(base, "root")
	a, err := Fresh(squatted)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Fresh(squatted)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{a, b} {
		fi, err := os.Lstat(d)
		if err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o700 || !strings.HasPrefix(d, squatted+".") || CheckDir(d) != nil {
			t.Errorf("Fresh = %s (%v, %v), want a private dir beside %s", d, fi, err, squatted)
		}
	}
	if a == b {
		t.Errorf("Fresh gave %s twice", a)
	}
	if os.Getuid() == 0 {
		theirs := filepath.Join(base, "theirs")
		os.Mkdir(theirs, 0o755)
		os.Chown(theirs, 4242, 4242)
		d, err := Fresh(filepath.Join(theirs, "root"))
		if err != nil || filepath.Dir(d) != os.TempDir() {
			t.Errorf("Fresh in another user's folder = %s, %v; want a dir in %s", d, err, os.TempDir())
		}
		os.Remove(d)
	}
}

// As the other user of the test cluster, on this machine: they make
// /tmp/monarch-<uid> before the job's user does (here in a sticky folder
// of the test's, as /tmp is); the job's fallbacks under it (ctl, jobs) are
// refused, though each would pass on its own, and Fresh steps around it.
func TestSquattedParentAsOtherUser(t *testing.T) {
	c := testcluster.Get(t)
	tmp, err := os.MkdirTemp("/tmp", "monarch-privfs-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(tmp) })
	os.Chmod(tmp, 0o777|os.ModeSticky)
	parent := filepath.Join(tmp, "monarch-"+strconv.Itoa(os.Getuid()))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// Theirs, open to all: the job's user could make ctl in it, and they
	// could rename it away.
	if out, err := c.AsOther(ctx, "", "sh", "-c", `mkdir -m 0777 "$1" && chmod 0777 "$1"`, "sh", parent).CombinedOutput(); err != nil {
		t.Fatalf("as %s: %v: %s", c.Other.Name, err, out)
	}
	for _, sub := range []string{"ctl", "jobs"} {
		dir := filepath.Join(parent, sub)
		refused(t, "Dir "+dir, Dir(dir), parent+", above "+dir+", belongs to uid "+strconv.Itoa(c.Other.UID))
		if _, err := os.Lstat(dir); err == nil {
			t.Errorf("made %s in their folder", dir)
		}
	}
	fresh, err := Fresh(parent)
	if err != nil || !strings.HasPrefix(fresh, parent+".") || CheckDir(fresh) != nil {
		t.Errorf("Fresh = %s, %v; want a private dir beside %s", fresh, err, parent)
	}
	// They cannot touch it: the sticky folder keeps its entry ours.
	if out, err := c.AsOther(ctx, "", "sh", "-c", `mv "$1" "$1.gone" 2>&1 || rmdir "$1" 2>&1 || true`, "sh", fresh).CombinedOutput(); err != nil || CheckDir(fresh) != nil {
		t.Errorf("as %s: moved or removed %s (%v): %s", c.Other.Name, fresh, err, out)
	}
}
