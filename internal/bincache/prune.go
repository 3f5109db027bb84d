package bincache

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// DefaultKeep is how long Prune keeps an entry after its last use when
// not told otherwise.
const DefaultKeep = 7 * 24 * time.Hour

// partKeep is how long a part (a binary on its way) may lie before Prune
// takes it for one whose sender died.
const partKeep = time.Hour

// DefaultDir is the cache dir of this machine when the hosts file does
// not name one: $XDG_CACHE_HOME/monarch/bin, else ~/.cache/monarch/bin,
// as the host scripts resolve it.
func DefaultDir() (string, error) {
	if x := os.Getenv("XDG_CACHE_HOME"); x != "" {
		return filepath.Join(x, "monarch", "bin"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(home, ".cache", "monarch", "bin"), nil
}

// Pruned is what Prune did.
type Pruned struct {
	Removed []string // the entries' directories removed
	Bytes   int64    // what they held
	InUse   int      // entries kept because a running process executes them
	Recent  int      // entries kept because they were used within keep
}

// Prune removes the entries of cache dir that no running process of this
// machine executes and that were last used more than keep before now
// (their directory's time: each use touches it), and the parts that have
// lain there longer than an hour. A dir that does not exist holds
// nothing. It touches only entries, directories named by a sha256.
func Prune(dir string, keep time.Duration, now time.Time) (Pruned, error) {
	var p Pruned
	if r, err := filepath.EvalSymlinks(dir); err == nil {
		dir = r // as /proc names the executables
	}
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return p, nil
	}
	if err != nil {
		return p, err
	}
	running := executables()
	for _, e := range entries {
		if !e.IsDir() || !isSum(e.Name()) {
			continue
		}
		d := filepath.Join(dir, e.Name())
		fi, err := os.Stat(d)
		if err != nil {
			continue // removed meanwhile
		}
		switch {
		case running[d]:
			p.InUse++
			removeParts(d, now)
		case now.Sub(fi.ModTime()) < keep:
			p.Recent++
			removeParts(d, now)
		default:
			n := du(d)
			// An entry is 0500 in a 0700 dir: removable as it is.
			if err := os.RemoveAll(d); err != nil {
				return p, err
			}
			p.Removed = append(p.Removed, d)
			p.Bytes += n
		}
	}
	return p, nil
}

// removeParts removes the parts in entry dir d older than partKeep.
func removeParts(d string, now time.Time) {
	files, _ := os.ReadDir(d)
	for _, f := range files {
		if !strings.HasPrefix(f.Name(), ".") || !strings.HasSuffix(f.Name(), ".part") {
			continue
		}
		if fi, err := f.Info(); err == nil && now.Sub(fi.ModTime()) > partKeep {
			os.Remove(filepath.Join(d, f.Name()))
		}
	}
}

// executables are the entry dirs (a binary's directory) of the programs
// running processes of this machine execute, as far as /proc shows them.
func executables() map[string]bool {
	out := map[string]bool{}
	procs, _ := os.ReadDir("/proc")
	for _, p := range procs {
		if p.Name()[0] < '0' || p.Name()[0] > '9' {
			continue
		}
		exe, err := os.Readlink(filepath.Join("/proc", p.Name(), "exe"))
		if err != nil {
			continue // gone, or another user's
		}
		out[filepath.Dir(strings.TrimSuffix(exe, " (deleted)"))] = true
	}
	return out
}

// du is the size of the files in d.
func du(d string) int64 {
	var n int64
	files, _ := os.ReadDir(d)
	for _, f := range files {
		if fi, err := f.Info(); err == nil && fi.Mode().IsRegular() {
			n += fi.Size()
		}
	}
	return n
}

func isSum(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !(s[i] >= '0' && s[i] <= '9' || s[i] >= 'a' && s[i] <= 'f') {
			return false
		}
	}
	return true
}
