package logagg

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"os"

	"github.com/monarch-go/monarch/internal/procid"
)

// Ended reports whether the job's log in dir is complete, for a job that
// has no other record (its state): the last record is an end record, or
// the last writer (the last start record found in the file's head and
// tail) ran on this host and is gone. A writer of another host that did
// not close its log cannot be checked: false. A job without a log has
// ended.
func Ended(dir, job string) (bool, error) {
	if err := checkJob(job); err != nil {
		return false, err
	}
	f, err := os.Open(logPath(dir, job))
	if errors.Is(err, fs.ErrNotExist) {
		f, err = os.Open(logPath(dir, job) + ".1")
	}
	if errors.Is(err, fs.ErrNotExist) {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return false, err
	}
	const window = 64 << 10
	head := make([]byte, min(fi.Size(), window))
	if _, err := io.ReadFull(f, head); err != nil {
		return false, err
	}
	tail := head
	if fi.Size() > window {
		tail = make([]byte, window)
		if _, err := f.ReadAt(tail, fi.Size()-window); err != nil {
			return false, err
		}
	}
	var start, last fileRecord
	for _, part := range [][]byte{head, tail} {
		for line := range bytes.Lines(part) {
			var rec fileRecord
			if !bytes.HasSuffix(line, []byte("\n")) || json.Unmarshal(line, &rec) != nil {
				continue // cut by the window, or torn
			}
			if rec.K == "start" {
				start = rec
			}
			last = rec
		}
	}
	if last.K == "end" {
		return true, nil
	}
	host, _ := os.Hostname()
	return start.PID > 0 && start.H == host && procid.Gone(start.PID, start.PST), nil
}
