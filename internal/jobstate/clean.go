package jobstate

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"time"
)

// Removed is a job that Clean removed.
type Removed struct {
	*Record
	Files int   // files removed
	Bytes int64 // their size
}

// Clean removes the records of the jobs in dir that ended at least
// olderThan before now, with their other files (files(job) lists them:
// the job's logs; missing ones are skipped). A job that may still run is
// never removed: one of this host whose process is alive, one of another
// host whose record does not say it ended, a submitted job its scheduler
// has not finished (the caller sets BatchState). Removal stops at the
// first error.
//
// An array goes with its tasks, once it has ended (and so have they): a
// task whose array has a record is removed with it, never alone.
func Clean(recs []*Record, dir string, olderThan time.Duration, now time.Time, files func(job string) []string) ([]Removed, error) {
	tasks := map[string][]*Record{}
	for _, r := range recs {
		if r.ArrayJob != "" {
			tasks[r.ArrayJob] = append(tasks[r.ArrayJob], r)
		}
	}
	var out []Removed
	for _, r := range recs {
		if r.Active() || now.Sub(r.EndTime()) < olderThan {
			continue
		}
		if r.ArrayJob != "" && slices.ContainsFunc(recs, func(a *Record) bool { return a.Job == r.ArrayJob }) {
			continue // with its array
		}
		if slices.ContainsFunc(tasks[r.Job], (*Record).Active) {
			continue // a task its array's launcher did not see end (killed)
		}
		rm := Removed{Record: r}
		var paths []string
		for _, t := range tasks[r.Job] {
			paths = append(paths, files(t.Job)...)
			paths = append(paths, Path(dir, t.Job))
		}
		// The logs first: a record left behind by a failed removal still
		// lists the job.
		for _, p := range append(append(paths, files(r.Job)...), Path(dir, r.Job)) {
			n, err := removeFile(p)
			if err != nil {
				return out, err
			}
			if n >= 0 {
				rm.Files++
				rm.Bytes += n
			}
		}
		out = append(out, rm)
	}
	return out, nil
}

// RemoveFiles removes the given files, skipping missing ones, and returns
// how many it removed and their size.
func RemoveFiles(paths []string) (files int, bytes int64, err error) {
	for _, p := range paths {
		n, err := removeFile(p)
		if err != nil {
			return files, bytes, err
		}
		if n >= 0 {
			files++
			bytes += n
		}
	}
	return files, bytes, nil
}

// removeFile removes a regular file (never what a link points to) and
// returns its size, or -1 if it was not there.
func removeFile(path string) (int64, error) {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return -1, nil
	}
	if err != nil {
		return 0, fmt.Errorf("clean: %w", err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return 0, fmt.Errorf("clean: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return 0, nil
	}
	return fi.Size(), nil
}

// Usage returns the number of jobs with a record in dir and the size of
// every file there (records, logs, rotated logs). A missing dir uses none.
func Usage(dir string) (jobs int, bytes int64, err error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, 0, nil
	}
	if err != nil {
		return 0, 0, fmt.Errorf("job state: %w", err)
	}
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		fi, err := e.Info()
		if err != nil {
			continue // removed meanwhile
		}
		bytes += fi.Size()
		if n := e.Name(); len(n) > 5 && n[0] != '.' && n[len(n)-5:] == ".json" {
			jobs++
		}
	}
	return jobs, bytes, nil
}
