package logagg

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/monarch-go/monarch/internal/privfs"
)

// Retention of system logs: PruneSystemLogs removes the files not written
// for SystemLogRetention, except those of jobs that still run. Clients and
// host agents call it as they start; it does its work at most once per
// pruneEvery in a dir (a marker file's time says when it last did) and
// looks at no more than pruneScan entries, removing at most pruneMax, so
// that a start stays cheap. A dir with more left over is pruned further at
// the next start.
const (
	SystemLogRetention = 7 * 24 * time.Hour
	pruneEvery         = time.Hour
	pruneScan          = 8192
	pruneMax           = 1024
	pruneMarker        = ".monarch-pruned"
)

// SystemLogJob returns the job of a system log's file name
// (monarch_<job>_<role>.log; roles hold no '_', job ids may).
func SystemLogJob(name string) (string, bool) {
	rest, ok := strings.CutPrefix(name, "monarch_")
	if !ok {
		return "", false
	}
	rest, ok = strings.CutSuffix(rest, ".log")
	i := strings.LastIndexByte(rest, '_')
	if !ok || i <= 0 || i == len(rest)-1 {
		return "", false
	}
	return rest[:i], true
}

// PruneSystemLogs removes from dir the system logs last written before
// now-SystemLogRetention, unless running(job) says their job still runs,
// and returns how many it removed. It does nothing if it ran less than an
// hour ago in dir, or dir is missing; a dir that is not private is left
// alone (with the error).
func PruneSystemLogs(dir string, now time.Time, running func(job string) bool) (int, error) {
	if err := privfs.CheckDir(dir); err != nil {
		return 0, err
	}
	marker := filepath.Join(dir, pruneMarker)
	if fi, err := os.Lstat(marker); err == nil && now.Sub(fi.ModTime()) < pruneEvery {
		return 0, nil
	}
	d, err := os.Open(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	entries, err := d.ReadDir(pruneScan)
	d.Close()
	if err != nil && !errors.Is(err, io.EOF) {
		return 0, err
	}
	complete := len(entries) < pruneScan
	removed := 0
	for _, e := range entries {
		job, ok := SystemLogJob(e.Name())
		if !ok || !e.Type().IsRegular() {
			continue
		}
		if removed == pruneMax {
			complete = false
			break
		}
		fi, err := e.Info()
		if err != nil || now.Sub(fi.ModTime()) < SystemLogRetention || running(job) {
			continue
		}
		if os.Remove(filepath.Join(dir, e.Name())) == nil {
			removed++
		}
	}
	if complete {
		// Done for an hour. (A marker that cannot be made only means
		// the next start looks again.)
		if f, err := privfs.OpenFile(marker, os.O_CREATE|os.O_WRONLY, 0o600); err == nil {
			f.Close()
			os.Chtimes(marker, now, now)
		}
	}
	return removed, nil
}

// SystemLogsOf lists the system logs of each job in dir, by job.
func SystemLogsOf(dir string) (map[string][]string, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	byJob := map[string][]string{}
	for _, e := range entries {
		if job, ok := SystemLogJob(e.Name()); ok && e.Type().IsRegular() {
			byJob[job] = append(byJob[job], filepath.Join(dir, e.Name()))
		}
	}
	return byJob, nil
}
