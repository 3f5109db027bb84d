package logagg

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/monarch-go/monarch/internal/privfs"
	"github.com/monarch-go/monarch/internal/procid"
)

// The job's log: every line of a job, as the client received it, in
// <dir>/<job>.log, so that `monarch logs` can replay a finished job or
// follow a running one from another terminal.
//
// The file holds JSON lines, one record per line. A proc's line is
//
//	{"t":"2026-12-02T10:00:00.123456789Z","h":"node3","p":"h3-1","m":"trainer","r":25,"s":"stdout","x":"step 100 loss=0.42"}
//
// (time RFC3339Nano, host, proc, its proc mesh's name, rank, stream,
// text; logs written before meshes had names have no "m"). The lines of
// the job's client program have the proc "client" (ClientProc) and no
// mesh. A writer marks where
// it starts and ends:
//
//	{"t":...,"k":"start","job":"j1","h":"client-host","pid":4242,"pst":"123456"}
//	{"t":...,"k":"end"}
//
// pst is the writer's process start time on its host (Linux: clock ticks
// since boot, from /proc), so that a follower can tell the writer from a
// later process that got the same pid. Readers skip records of kinds they
// do not know.

// DefaultMaxBytes is the size at which a job's log is rotated: a job
// keeps at most about twice this much.
const DefaultMaxBytes = 64 << 20

var (
	// ErrNoJob: Read was asked for a job without a log; the error is a
	// *NoJobError listing the known jobs.
	ErrNoJob = errors.New("logs: no such job")
	// ErrCorrupt: records that could not be read were skipped; the error
	// is a *CorruptError counting them.
	ErrCorrupt = errors.New("logs: corrupt records skipped")

	errWriterClosed = errors.New("logagg: log writer closed")
)

// NoJobError is returned by Read for a job without a log in its dir.
type NoJobError struct {
	Job   string
	Dir   string
	Known []string // the jobs that have a log there, newest first
}

func (e *NoJobError) Error() string {
	if len(e.Known) == 0 {
		return fmt.Sprintf("logs: no job %q; no jobs in %s", e.Job, e.Dir)
	}
	const most = 20
	known := strings.Join(e.Known[:min(len(e.Known), most)], ", ")
	if len(e.Known) > most {
		known += fmt.Sprintf(" (and %d more)", len(e.Known)-most)
	}
	return fmt.Sprintf("logs: no job %q; known jobs: %s", e.Job, known)
}

// Is makes errors.Is(err, ErrNoJob) true.
func (e *NoJobError) Is(target error) bool { return target == ErrNoJob }

// CorruptError is returned by Read, after everything else was replayed,
// when some records could not be parsed: a crash in the middle of a
// write, or a file edited by hand. It is a warning more than a failure.
type CorruptError struct {
	Records int
}

func (e *CorruptError) Error() string {
	return fmt.Sprintf("logs: skipped %d corrupt records", e.Records)
}

// Is makes errors.Is(err, ErrCorrupt) true.
func (e *CorruptError) Is(target error) bool { return target == ErrCorrupt }

// logPath is the job's current log; the rotated one has ".1" appended.
func logPath(dir, job string) string { return filepath.Join(dir, job+".log") }

// LogFiles are the files of the job's log in dir: the current one and the
// rotated one (either may be missing).
func LogFiles(dir, job string) []string {
	p := logPath(dir, job)
	return []string{p, p + ".1"}
}

// checkJob refuses job names that would leave dir or hide the file.
func checkJob(job string) error {
	if job == "" || strings.ContainsAny(job, `/\`+"\x00") || job[0] == '.' {
		return fmt.Errorf("logs: bad job name %q", job)
	}
	return nil
}

// Writer appends lines to <dir>/<job>.log. Files are created 0600 and the
// dir, if missing, 0700: logs may hold anything a program prints.
//
// The log is bounded: when the file passes maxBytes it is renamed to
// <job>.log.1 (replacing the previous one) and a new file begins, so a
// job keeps at most about 2*maxBytes. Each file starts with a start record
// naming the writer's pid and host; Close appends an end record, which
// tells followers that the job's output is complete.
//
// Writes are buffered. Flush and Close write them out, and Write does
// when the last flush is more than a second old, so that a follower lags
// a busy writer by about a second; an idle writer's tail waits for Flush.
// After an I/O error the Writer keeps returning it. Writer is safe for
// concurrent use.
type Writer struct {
	mu        sync.Mutex
	path      string
	job       string
	host      string
	max       int64
	f         *os.File
	bw        *bufio.Writer
	size      int64 // of the current file, buffered bytes included
	lastFlush time.Time
	rec       []byte
	err       error
	closed    bool
}

// NewWriter opens (appending) or creates the log of job in dir. maxBytes
// <= 0 means DefaultMaxBytes.
func NewWriter(dir, job string, maxBytes int64) (*Writer, error) {
	if err := checkJob(job); err != nil {
		return nil, err
	}
	if maxBytes <= 0 {
		maxBytes = DefaultMaxBytes
	}
	if err := privfs.Dir(dir); err != nil {
		return nil, fmt.Errorf("logagg: log dir: %w", err)
	}
	host, _ := os.Hostname()
	w := &Writer{path: logPath(dir, job), job: job, host: host, max: maxBytes}
	if err := w.open(); err != nil {
		return nil, err
	}
	return w, nil
}

// open opens the current file and writes a start record.
func (w *Writer) open() error {
	f, err := privfs.OpenFile(w.path, os.O_CREATE|os.O_RDWR|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("logagg: open log: %w", err)
	}
	fi, err := f.Stat()
	if err == nil {
		err = f.Chmod(0o600) // an older file may have been made with other modes
	}
	var torn bool
	if err == nil && fi.Size() > 0 {
		// A writer that crashed mid-record left a line without its
		// newline: end it, so that our start record stays whole.
		var last [1]byte
		_, err = f.ReadAt(last[:], fi.Size()-1)
		torn = last[0] != '\n'
	}
	if err != nil {
		f.Close()
		return fmt.Errorf("logagg: open log: %w", err)
	}
	w.f, w.size, w.lastFlush = f, fi.Size(), time.Now()
	if w.bw == nil {
		w.bw = bufio.NewWriterSize(f, 64<<10)
	} else {
		w.bw.Reset(f)
	}
	pid := os.Getpid()
	pst := procid.Start(pid)
	b := w.rec[:0]
	if torn {
		b = append(b, '\n')
	}
	b = append(b, `{"t":`...)
	b = appendJSONTime(b, time.Now())
	b = append(b, `,"k":"start","job":`...)
	b = appendJSONString(b, w.job)
	b = append(b, `,"h":`...)
	b = appendJSONString(b, w.host)
	b = append(b, `,"pid":`...)
	b = strconv.AppendInt(b, int64(pid), 10)
	if pst != "" {
		b = append(b, `,"pst":`...)
		b = appendJSONString(b, pst)
	}
	b = append(b, "}\n"...)
	w.rec = b
	return w.put(b)
}

// put writes one record to the buffer.
func (w *Writer) put(b []byte) error {
	n, err := w.bw.Write(b)
	w.size += int64(n)
	if err != nil {
		return fmt.Errorf("logagg: write log: %w", err)
	}
	return nil
}

// Write appends l to the log.
func (w *Writer) Write(l Line) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return errWriterClosed
	}
	if w.err != nil {
		return w.err
	}
	w.rec = appendLineRecord(w.rec[:0], l)
	if err := w.put(w.rec); err != nil {
		w.err = err
		return err
	}
	switch {
	case w.size >= w.max:
		w.err = w.rotate()
	case time.Since(w.lastFlush) >= time.Second:
		w.err = w.flush()
	}
	return w.err
}

// rotate renames the full file to <job>.log.1 and starts a new one. The
// old file is complete before the rename: a follower that sees the new
// file may read the old one to its end and move on.
func (w *Writer) rotate() error {
	if err := w.flush(); err != nil {
		return err
	}
	if err := w.f.Close(); err != nil {
		return fmt.Errorf("logagg: rotate log: %w", err)
	}
	if err := os.Rename(w.path, w.path+".1"); err != nil {
		return fmt.Errorf("logagg: rotate log: %w", err)
	}
	return w.open()
}

func (w *Writer) flush() error {
	w.lastFlush = time.Now()
	if err := w.bw.Flush(); err != nil {
		return fmt.Errorf("logagg: write log: %w", err)
	}
	return nil
}

// Flush writes out the buffered lines.
func (w *Writer) Flush() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed || w.err != nil {
		return w.err
	}
	w.err = w.flush()
	return w.err
}

// Close writes the end record, flushes and closes the file. Later calls
// return nil; later Writes fail.
func (w *Writer) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return nil
	}
	w.closed = true
	if w.err != nil {
		if w.f != nil {
			w.f.Close()
		}
		return w.err
	}
	b := append(w.rec[:0], `{"t":`...)
	b = appendJSONTime(b, time.Now())
	b = append(b, `,"k":"end"}`+"\n"...)
	err := w.put(b)
	if err == nil {
		err = w.flush()
	}
	if cerr := w.f.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("logagg: close log: %w", cerr)
	}
	return err
}

func appendLineRecord(b []byte, l Line) []byte {
	b = append(b, `{"t":`...)
	b = appendJSONTime(b, l.Time)
	b = append(b, `,"h":`...)
	b = appendJSONString(b, l.Host)
	b = append(b, `,"p":`...)
	b = appendJSONString(b, l.Proc)
	if l.Mesh != "" {
		b = append(b, `,"m":`...)
		b = appendJSONString(b, l.Mesh)
	}
	b = append(b, `,"r":`...)
	b = strconv.AppendInt(b, int64(l.Rank), 10)
	b = append(b, `,"s":"`...)
	switch l.Stream {
	case Stdout, Stderr:
		b = append(b, l.Stream.String()...)
	default:
		b = strconv.AppendUint(b, uint64(l.Stream), 10)
	}
	b = append(b, `","x":`...)
	b = appendJSONString(b, l.Text)
	return append(b, "}\n"...)
}

func appendJSONTime(b []byte, t time.Time) []byte {
	b = append(b, '"')
	b = t.AppendFormat(b, time.RFC3339Nano)
	return append(b, '"')
}

// appendJSONString appends s as a JSON string. Invalid UTF-8 becomes
// U+FFFD, as encoding/json does; the rest is copied as it is, escaping
// only what JSON requires. Written by hand because the client writes every
// line of the job.
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && c < utf8.RuneSelf {
			i++
			continue
		}
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRuneInString(s[i:])
			if r != utf8.RuneError || size != 1 {
				i += size
				continue
			}
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i++
			start = i
			continue
		}
		b = append(b, s[start:i]...)
		switch c {
		case '"', '\\':
			b = append(b, '\\', c)
		case '\n':
			b = append(b, '\\', 'n')
		case '\r':
			b = append(b, '\\', 'r')
		case '\t':
			b = append(b, '\\', 't')
		default:
			b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		}
		i++
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// Jobs lists the jobs with a log in dir, newest (last written) first. A
// missing dir has none.
func Jobs(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("logs: %w", err)
	}
	type job struct {
		name string
		mod  time.Time
	}
	var jobs []job
	for _, e := range entries {
		name, ok := strings.CutSuffix(e.Name(), ".log")
		if !ok || !e.Type().IsRegular() || checkJob(name) != nil {
			continue
		}
		fi, err := e.Info()
		if err != nil {
			continue // removed meanwhile
		}
		jobs = append(jobs, job{name, fi.ModTime()})
	}
	sort.Slice(jobs, func(i, j int) bool {
		if !jobs[i].mod.Equal(jobs[j].mod) {
			return jobs[i].mod.After(jobs[j].mod)
		}
		return jobs[i].name < jobs[j].name
	})
	names := make([]string, len(jobs))
	for i, j := range jobs {
		names[i] = j.name
	}
	return names, nil
}

// Filter selects lines. The zero Filter selects all; each set field
// narrows the selection, and a line must pass all of them.
type Filter struct {
	Since  time.Time      // zero: all
	Hosts  []string       // empty: all
	Meshes []string       // empty: all; a line without a mesh passes none
	Ranks  []int          // empty: all; the client's lines pass none
	Stream Stream         // 0: both
	Grep   *regexp.Regexp // nil: all
}

// ParseSince reads a Filter's Since as people write it: a duration back
// from now (10m, 1h30m) or an RFC3339 time.
func ParseSince(s string, now time.Time) (time.Time, error) {
	if d, err := time.ParseDuration(s); err == nil && d >= 0 {
		return now.Add(-d), nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	return time.Time{}, errors.New("want a duration back from now (10m, 1h30m) or an RFC3339 time (2026-12-02T10:00:00Z)")
}

// ParseStream reads a Filter's Stream by its name: "stdout" or "stderr";
// "" is 0, both.
func ParseStream(s string) (Stream, error) {
	switch s {
	case "":
		return 0, nil
	case "stdout":
		return Stdout, nil
	case "stderr":
		return Stderr, nil
	}
	return 0, errors.New("want stdout or stderr")
}

// Match reports whether l passes f.
func (f Filter) Match(l Line) bool {
	switch {
	case !f.Since.IsZero() && l.Time.Before(f.Since),
		f.Stream != 0 && l.Stream != f.Stream,
		len(f.Hosts) > 0 && !slices.Contains(f.Hosts, l.Host),
		len(f.Meshes) > 0 && !slices.Contains(f.Meshes, l.Mesh),
		len(f.Ranks) > 0 && (l.Proc == ClientProc || !slices.Contains(f.Ranks, l.Rank)),
		f.Grep != nil && !f.Grep.MatchString(l.Text):
		return false
	}
	return true
}

// Read replays the job's log through emit, the rotated file first, passing
// only the lines that match f. A last line still without its newline is
// being written and is left out. An error from emit stops Read and is
// returned.
//
// With follow, Read then waits for new lines (polling the file every
// 200ms, so it needs no notification support from the file system) and
// returns nil after the writer's end record, or when the writer's process
// is gone: checked every second when the writer runs on this host (by pid
// and process start time). A writer on another host (a log dir shared over
// NFS) cannot be checked: Read then follows until the end record or until
// ctx ends, returning ctx.Err(). Following survives rotation: when the
// file is renamed, Read finishes the old file and continues with the new.
//
// An unknown job gives a *NoJobError (errors.Is ErrNoJob) listing the
// known ones. Records that cannot be parsed are skipped and counted; if
// there were any, Read returns a *CorruptError (errors.Is ErrCorrupt) once
// it is done.
func Read(ctx context.Context, dir, job string, f Filter, follow bool, emit func(Line) error) error {
	return read(ctx, dir, job, f, follow, emit, nil)
}

// Follow is Read with follow that also calls caughtUp each time it has
// emitted every line written so far and is about to wait for more: after
// the lines already written, then at every poll (every 200ms) while it
// follows. Its caller can thus write out what it keeps and end windows of
// wall time from the goroutine that reads, with no timer of its own. An
// error from caughtUp stops Follow and is returned, like one from emit.
func Follow(ctx context.Context, dir, job string, f Filter, emit func(Line) error, caughtUp func() error) error {
	return read(ctx, dir, job, f, true, emit, caughtUp)
}

func read(ctx context.Context, dir, job string, f Filter, follow bool, emit func(Line) error, caughtUp func() error) error {
	if err := checkJob(job); err != nil {
		return err
	}
	if err := privfs.CheckDir(dir); err != nil {
		return fmt.Errorf("logs: %w", err)
	}
	path := logPath(dir, job)
	old, cur, curInfo, err := openLogs(path, nil)
	if err != nil {
		return err
	}
	if cur == nil {
		known, err := Jobs(dir)
		if err != nil {
			return err
		}
		return &NoJobError{Job: job, Dir: dir, Known: known}
	}
	host, _ := os.Hostname()
	r := &logReader{ctx: ctx, filter: f, emit: emit, idle: caughtUp, host: host, chunk: make([]byte, 64<<10)}
	defer func() { cur.Close() }() // cur changes while following
	if old != nil {
		err := r.readFile(old)
		old.Close()
		if err != nil {
			return err
		}
	}
	if err := r.readAvailable(cur); err != nil {
		return err
	}
	if follow {
		if err := r.follow(path, &cur, curInfo); err != nil {
			return err
		}
	}
	if r.corrupt > 0 {
		return &CorruptError{Records: r.corrupt}
	}
	return nil
}

// openLogs opens path and then path.1. A rotation between the two opens
// would show the same file twice: then, or when path.1 is the file prev
// that the caller has already read, path.1 is left out. When only path.1
// exists (a writer between its rename and its create), it is returned as
// cur. Missing files are nil.
func openLogs(path string, prev os.FileInfo) (old, cur *os.File, curInfo os.FileInfo, err error) {
	open := func(p string) (*os.File, os.FileInfo, error) {
		f, err := os.Open(p)
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil, nil
		}
		if err != nil {
			return nil, nil, fmt.Errorf("logs: %w", err)
		}
		fi, err := f.Stat()
		if err != nil {
			f.Close()
			return nil, nil, fmt.Errorf("logs: %w", err)
		}
		return f, fi, nil
	}
	cur, curInfo, err = open(path)
	if err != nil {
		return nil, nil, nil, err
	}
	old, oldInfo, err := open(path + ".1")
	if err != nil {
		if cur != nil {
			cur.Close()
		}
		return nil, nil, nil, err
	}
	if old != nil && (cur != nil && os.SameFile(oldInfo, curInfo) || prev != nil && os.SameFile(oldInfo, prev)) {
		old.Close()
		old = nil
	}
	if cur == nil {
		return nil, old, oldInfo, nil
	}
	return old, cur, curInfo, nil
}

// pollInterval is how often a follower looks for new lines and rotation;
// pidInterval how often it checks that the writer is alive.
const (
	pollInterval = 200 * time.Millisecond
	pidInterval  = time.Second
	// maxRecord bounds a record a reader will hold: a 4 KiB line escaped
	// takes at most 24 KiB. A longer one is skipped as corrupt.
	maxRecord = 1 << 20
)

// logReader parses records from successive files.
type logReader struct {
	ctx     context.Context
	filter  Filter
	emit    func(Line) error
	idle    func() error // Follow's caughtUp, or nil
	host    string       // this host
	chunk   []byte
	partial []byte // the start of a record whose newline has not come yet
	skip    bool   // dropping an oversized record up to its newline
	corrupt int

	// from the last start record
	wPID  int
	wHost string
	wPST  string
	ended bool // an end record came after the last start record
}

// readFile reads a complete file: a trailing record without its newline
// is corrupt.
func (r *logReader) readFile(f *os.File) error {
	if err := r.readAvailable(f); err != nil {
		return err
	}
	r.endOfFile()
	return nil
}

// endOfFile counts an unfinished record as corrupt and forgets it.
func (r *logReader) endOfFile() {
	if len(r.partial) > 0 {
		r.corrupt++
	}
	r.partial, r.skip = r.partial[:0], false
}

// readAvailable reads f up to its current end.
func (r *logReader) readAvailable(f *os.File) error {
	for {
		if err := r.ctx.Err(); err != nil {
			return err
		}
		n, err := f.Read(r.chunk)
		if n > 0 {
			if err := r.consume(r.chunk[:n]); err != nil {
				return err
			}
		}
		if errors.Is(err, io.EOF) || n == 0 && err == nil {
			return nil
		}
		if err != nil {
			return fmt.Errorf("logs: %w", err)
		}
	}
}

// consume splits b into records, keeping an unfinished one for later.
func (r *logReader) consume(b []byte) error {
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			switch {
			case r.skip:
			case len(r.partial)+len(b) > maxRecord:
				r.partial, r.skip = r.partial[:0], true
				r.corrupt++
			default:
				r.partial = append(r.partial, b...)
			}
			return nil
		}
		rec := b[:i]
		b = b[i+1:]
		if r.skip {
			r.skip = false
			continue
		}
		if len(r.partial) > 0 {
			r.partial = append(r.partial, rec...)
			rec = r.partial
		}
		err := r.record(rec)
		r.partial = r.partial[:0]
		if err != nil {
			return err
		}
	}
	return nil
}

// fileRecord is any record of a log file.
type fileRecord struct {
	T   time.Time `json:"t"`
	K   string    `json:"k"`
	H   string    `json:"h"`
	P   string    `json:"p"`
	M   string    `json:"m"`
	R   int       `json:"r"`
	S   string    `json:"s"`
	X   string    `json:"x"`
	PID int       `json:"pid"`
	PST string    `json:"pst"`
}

func (r *logReader) record(b []byte) error {
	if len(bytes.TrimSpace(b)) == 0 {
		return nil
	}
	var rec fileRecord
	if err := json.Unmarshal(b, &rec); err != nil {
		r.corrupt++
		return nil
	}
	switch rec.K {
	case "":
		s, ok := parseStream(rec.S)
		if !ok {
			r.corrupt++
			return nil
		}
		l := Line{Time: rec.T, Host: rec.H, Proc: rec.P, Mesh: rec.M, Rank: rec.R, Stream: s, Text: rec.X}
		if !r.filter.Match(l) {
			return nil
		}
		return r.emit(l)
	case "start":
		r.wPID, r.wHost, r.wPST, r.ended = rec.PID, rec.H, rec.PST, false
	case "end":
		r.ended = true
	}
	return nil
}

func parseStream(s string) (Stream, bool) {
	switch s {
	case "stdout":
		return Stdout, true
	case "stderr":
		return Stderr, true
	}
	n, err := strconv.ParseUint(s, 10, 8)
	return Stream(n), err == nil
}

// follow waits for more of the log (see Read). *cur is the open current
// file, nil if there is none for now; follow replaces it on rotation and
// the caller closes the last one.
func (r *logReader) follow(path string, cur **os.File, curInfo os.FileInfo) error {
	t := time.NewTimer(pollInterval)
	defer t.Stop()
	var lastCheck time.Time
	for {
		if r.ended {
			return nil
		}
		if fi, err := os.Stat(path); err == nil && (*cur == nil || !os.SameFile(fi, curInfo)) {
			// Rotated: the old file was complete before the rename.
			if *cur != nil {
				if err := r.readFile(*cur); err != nil {
					return err
				}
			}
			old, next, nextInfo, err := openLogs(path, curInfo)
			if err != nil {
				return err
			}
			if *cur != nil {
				(*cur).Close()
			}
			*cur, curInfo = next, nextInfo
			if old != nil { // rotated more than once since the last look
				err := r.readFile(old)
				old.Close()
				if err != nil {
					return err
				}
			}
			if *cur != nil {
				if err := r.readAvailable(*cur); err != nil {
					return err
				}
			}
			continue
		}
		if now := time.Now(); now.Sub(lastCheck) >= pidInterval {
			lastCheck = now
			if r.writerGone() {
				// Whatever it wrote is on disk: read it, then stop.
				if *cur != nil {
					return r.readFile(*cur)
				}
				return nil
			}
		}
		if r.idle != nil {
			if err := r.idle(); err != nil {
				return err
			}
		}
		t.Reset(pollInterval)
		select {
		case <-r.ctx.Done():
			return r.ctx.Err()
		case <-t.C:
		}
		if *cur != nil {
			if err := r.readAvailable(*cur); err != nil {
				return err
			}
		}
	}
}

// writerGone reports whether the writer of the last start record has
// exited. Only a writer on this host can be checked; one on another host
// never counts as gone.
func (r *logReader) writerGone() bool {
	if r.wPID <= 0 || r.wHost != r.host {
		return false
	}
	return procid.Gone(r.wPID, r.wPST)
}
