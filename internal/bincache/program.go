package bincache

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
)

// Errors of OpenProgram's checks.
var (
	// ErrUnsafe is wrapped by the errors of a file or folder that breaks
	// the rule (Safe).
	ErrUnsafe = errors.New("not private")
	// ErrChanged is wrapped by the error of a program whose sha256 is not
	// the one it was to have.
	ErrChanged = errors.New("not the program sent")
)

// Safe checks the rule a binary must keep to be run, here as the host
// scripts check it there: the file at path (with every symbolic link
// resolved) is a regular file, it and every folder above it belong to
// this user or to root, and no one else may write to any of them. The one exception is a folder above that root
// owns with the sticky bit set (/tmp, /var/tmp, /dev/shm): others may add
// to it, but not rename or remove what is not theirs, and what lies below
// must keep the rule. The error names the first that breaks it, and how.
// It returns path resolved.
func Safe(path string) (string, error) {
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return "", err
	}
	if real, err = filepath.Abs(real); err != nil {
		return "", err
	}
	for p, leaf := real, true; ; p, leaf = filepath.Dir(p), false {
		fi, err := os.Lstat(p)
		if err != nil {
			return "", err
		}
		if err := keeps(p, fi, leaf); err != nil {
			return "", err
		}
		if p == "/" {
			return real, nil
		}
	}
}

// keeps checks one file or folder of Safe's walk: leaf is the file asked
// about; the folders above must be directories, and the sticky exception
// is theirs.
func keeps(path string, fi fs.FileInfo, leaf bool) error {
	m := fi.Mode()
	switch {
	case m&fs.ModeSymlink != 0:
		return fmt.Errorf("%w: %s is a symbolic link", ErrUnsafe, path)
	case leaf && !m.IsRegular():
		return fmt.Errorf("%w: %s is not a regular file", ErrUnsafe, path)
	case !leaf && !m.IsDir():
		return fmt.Errorf("%w: %s is not a directory", ErrUnsafe, path)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fmt.Errorf("%w: %s: no owner to check", ErrUnsafe, path)
	}
	if uid := os.Getuid(); int(st.Uid) != uid && st.Uid != 0 {
		return fmt.Errorf("%w: %s belongs to %s, not to you (uid %d) or root", ErrUnsafe, path, owner(st.Uid), uid)
	}
	sticky := !leaf && st.Uid == 0 && st.Mode&syscall.S_ISVTX != 0
	if st.Mode&0o022 != 0 && !sticky {
		return fmt.Errorf("%w: %s is writable by others (mode %04o)", ErrUnsafe, path, st.Mode&0o7777)
	}
	return nil
}

// owner names uid for a message: "alice (uid 1001)".
func owner(uid uint32) string {
	if u, err := user.LookupId(strconv.Itoa(int(uid))); err == nil {
		return u.Username + " (uid " + strconv.Itoa(int(uid)) + ")"
	}
	return "uid " + strconv.Itoa(int(uid))
}

// Program is a program opened once, checked, and run from its descriptor
// from then on, never again from its name: what runs is what was checked,
// whatever happens at the path later.
type Program struct {
	Path string   // as given
	Real string   // Path resolved: the file opened
	Sum  string   // its sha256, when it was checked against one
	File *os.File // open for reading; close-on-exec
}

// OpenProgram opens the program at path (a name without a slash is looked
// up in PATH) to run: it must keep the rule (Safe) and, when sum is not
// "", have that sha256: read from the open descriptor, or, for a copy in
// a binary cache whose stamp describes the open file (see Stamps in the
// package doc), as the stamp says, unread. The error says which check
// failed and how.
func OpenProgram(path, sum string) (*Program, error) {
	if filepath.Base(path) == path {
		lp, err := exec.LookPath(path)
		if err != nil {
			return nil, err
		}
		path = lp
	}
	real, err := Safe(path)
	if err != nil {
		return nil, err
	}
	// The folders keep the rule: no one else can put another file at
	// real now. The file itself is checked again on the descriptor.
	f, err := os.OpenFile(real, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	p := &Program{Path: path, Real: real, File: f}
	if err := p.check(sum); err != nil {
		f.Close()
		return nil, err
	}
	return p, nil
}

// check checks the open file keeps the rule and, with sum, has that
// sha256 (hashed, unless its stamp says so).
func (p *Program) check(sum string) error {
	fi, err := p.File.Stat()
	if err != nil {
		return err
	}
	if err := keeps(p.Real, fi, true); err != nil {
		return err
	}
	if sum == "" {
		return nil
	}
	if stamped(p.File, p.Real, sum) {
		p.Sum = sum
		return nil
	}
	h := sha256.New()
	if _, err := io.Copy(h, io.NewSectionReader(p.File, 0, fi.Size())); err != nil {
		return fmt.Errorf("read %s: %w", p.Real, err)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != sum {
		return fmt.Errorf("%w: %s has sha256 %s, not %s", ErrChanged, p.Real, Short(got), Short(sum))
	}
	p.Sum = sum
	return nil
}

// ExecPath is the path a child runs the program by when the program's
// descriptor is its file number fd (exec.Cmd.ExtraFiles[i] is 3+i): the
// file that was opened, whatever is at its name by then.
func ExecPath(fd int) string { return "/proc/self/fd/" + strconv.Itoa(fd) }

// Close closes the program's descriptor.
func (p *Program) Close() error { return p.File.Close() }
