// Package privfs keeps private files: the directories where monarch writes
// job records and logs (~/.monarch/jobs, /tmp/$USER) and the files in
// them. On a shared login node another user can create /tmp/alice before
// alice does, as a directory of theirs or as a symbolic link to a file of
// alice's choosing; writing through either would hand them her logs or let
// them overwrite her files. So a directory is used only if it is a real
// directory (not a link), owned by this user and writable by nobody else,
// and files are opened without following a link and checked to be this
// user's.
//
// A private directory in a folder someone else can write is not private:
// they can rename it away and put one of theirs in its place
// (/tmp/monarch-1000 made by another user, holding alice's ctl). So every
// folder above it must be this user's or root's, and writable by no one
// else unless sticky, as /tmp is (where no one renames another's entry).
//
// A default directory someone squatted need not stop a job: Fresh makes a
// new private one in its place, under a name no one could have taken
// first; the caller says where its files went.
package privfs

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// ErrUnsafe is wrapped by the errors that refuse a directory or a file.
var ErrUnsafe = errors.New("unsafe path")

// Dir makes sure dir is a private directory: it creates it (and its
// missing parents) with mode 0700, or checks that the one there is a
// directory, not a symbolic link, owned by this user and not writable by
// group or others. The error says what is wrong and how to fix it.
func Dir(dir string) error {
	if err := check(dir); !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o700); err != nil {
		return fmt.Errorf("create %s: %w", filepath.Dir(dir), err)
	}
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	// Made by us, or by someone faster: check it either way.
	return check(dir)
}

// CheckDir is Dir without creating: nil when dir is missing or private.
func CheckDir(dir string) error {
	if err := check(dir); !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

func check(dir string) error {
	if err := checkAbove(dir); err != nil {
		return err
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		target, _ := os.Readlink(dir)
		return fmt.Errorf("%w: %s is a symbolic link (to %s), not a directory: monarch does not follow it, "+
			"since someone else may have made it; remove it (rm %s) and run again", ErrUnsafe, dir, target, dir)
	}
	if !fi.IsDir() {
		return fmt.Errorf("%w: %s is not a directory; remove it or move it away and run again", ErrUnsafe, dir)
	}
	if err := owned(dir, fi); err != nil {
		return err
	}
	if perm := fi.Mode().Perm(); perm&0o022 != 0 {
		return fmt.Errorf("%w: %s is writable by other users (mode %04o): run chmod 700 %s", ErrUnsafe, dir, perm, dir)
	}
	return nil
}

// checkAbove checks the folders above dir, as written and as its links
// resolve: each must be this user's or root's, and writable by others only
// if sticky. Folders not there yet are skipped (Dir makes them, then
// checks again).
func checkAbove(dir string) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	parent := filepath.Dir(abs)
	paths := []string{parent}
	if real, err := filepath.EvalSymlinks(parent); err == nil && real != parent {
		paths = append(paths, real)
	}
	for _, p := range paths {
		for up := p; ; up = filepath.Dir(up) {
			if err := checkFolder(up, dir); err != nil {
				return err
			}
			if up == filepath.Dir(up) {
				break
			}
		}
	}
	return nil
}

// checkFolder checks one folder above dir (or a link on the way to it).
func checkFolder(folder, dir string) error {
	fi, err := os.Lstat(folder)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return nil // no owner to check on this system
	}
	if uid := os.Getuid(); int(st.Uid) != uid && st.Uid != 0 {
		return fmt.Errorf("%w: %s, above %s, belongs to uid %d, neither you (uid %d) nor root: they can rename %s away and put "+
			"theirs in its place; point monarch elsewhere (MONARCH_STATE_DIR, MONARCH_SYSLOG_DIR, TMPDIR)",
			ErrUnsafe, folder, dir, st.Uid, uid, filepath.Base(dir))
	}
	if perm := fi.Mode(); fi.IsDir() && perm.Perm()&0o022 != 0 && perm&fs.ModeSticky == 0 {
		return fmt.Errorf("%w: %s, above %s, is writable by other users (mode %04o) and not sticky: they can rename %s away; "+
			"run chmod go-w %s, or point monarch elsewhere (MONARCH_STATE_DIR, MONARCH_SYSLOG_DIR, TMPDIR)",
			ErrUnsafe, folder, dir, perm.Perm(), filepath.Base(dir), folder)
	}
	return nil
}

// Replace returns the directory to use for dir, a default one of this
// user's: dir itself when it is missing or private (squatted is nil);
// when another user squatted it (ErrUnsafe: theirs, a link, writable by
// others, in a folder they can rename it in), a fresh private directory
// in its place (Fresh), with why dir was refused. err says why there is
// none.
func Replace(dir string) (use string, squatted, err error) {
	squatted = CheckDir(dir)
	if !errors.Is(squatted, ErrUnsafe) {
		return dir, nil, squatted
	}
	use, err = Fresh(dir)
	return use, squatted, err
}

// Fresh makes a new private directory to use instead of dir, which
// another user squatted: beside dir, named after it with a random suffix
// (os.MkdirTemp makes it 0700 and fails rather than take one that is
// there, so no one can have made it first), or in os.TempDir() when dir's
// folder is missing or not safe to hold it. It returns the new directory.
func Fresh(dir string) (string, error) {
	name := filepath.Base(dir)
	var errs []error
	for _, in := range []string{filepath.Dir(dir), os.TempDir()} {
		if err := checkAbove(filepath.Join(in, name)); err != nil {
			errs = append(errs, err)
			continue
		}
		d, err := os.MkdirTemp(in, name+".")
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if err := check(d); err != nil {
			os.Remove(d)
			errs = append(errs, err)
			continue
		}
		return d, nil
	}
	return "", fmt.Errorf("no private directory in place of %s: %w", dir, errors.Join(errs...))
}

func owned(path string, fi fs.FileInfo) error {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return nil // no owner to check on this system
	}
	if uid := os.Getuid(); int(st.Uid) != uid {
		return fmt.Errorf("%w: %s belongs to uid %d, not to you (uid %d): another user made it; "+
			"ask them or an admin to remove it, or point monarch elsewhere (MONARCH_STATE_DIR, MONARCH_SYSLOG_DIR, TMPDIR)",
			ErrUnsafe, path, st.Uid, uid)
	}
	return nil
}

// OpenFile opens name like os.OpenFile, but never through a symbolic link
// (O_NOFOLLOW), and refuses a file that is not a regular file of this
// user's. Files it creates get perm.
func OpenFile(name string, flag int, perm fs.FileMode) (*os.File, error) {
	f, err := os.OpenFile(name, flag|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, perm)
	if errors.Is(err, syscall.ELOOP) {
		return nil, fmt.Errorf("%w: %s is a symbolic link: monarch does not follow it; remove it (rm %s) and run again", ErrUnsafe, name, name)
	}
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err == nil && !fi.Mode().IsRegular() {
		err = fmt.Errorf("%w: %s is not a regular file; remove it and run again", ErrUnsafe, name)
	}
	if err == nil {
		err = owned(name, fi)
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// WriteFile replaces dir/name with data atomically: it writes a temporary
// file in dir (a new file, never an existing one or a link) and renames it
// over name, so a reader sees the old content or the new, never a part.
func WriteFile(dir, name string, data []byte) error {
	f, err := os.CreateTemp(dir, "."+name+".*.tmp") // O_EXCL: a fresh file
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, filepath.Join(dir, name))
	}
	if err != nil {
		os.Remove(tmp)
	}
	return err
}
