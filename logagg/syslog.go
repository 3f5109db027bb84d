package logagg

import (
	"fmt"
	"io"
	"os"
	"os/user"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/monarch-go/monarch/internal/privfs"
	"github.com/rs/zerolog"
)

// System logs: monarch's own messages, never the user's output. Each
// process of a job writes them to /tmp/$USER/monarch_<job>_<role>.log
// (folder 0700, file 0600; MONARCH_SYSLOG_DIR moves them) at the level of
// MONARCH_FILE_LOG (default INFO), and the more urgent ones to stderr at
// MONARCH_STDERR_LOG (default WARN). A file is made only when something is
// written to it; PruneSystemLogs removes old ones.

const (
	EnvFileLevel   = "MONARCH_FILE_LOG"
	EnvStderrLevel = "MONARCH_STDERR_LOG"
)

// LevelNames are the accepted level names.
var LevelNames = []string{"TRACE", "DEBUG", "INFO", "WARN", "ERROR"}

// ParseLevel reads a level name (any case); the error lists the valid
// names.
func ParseLevel(s string) (zerolog.Level, error) {
	switch strings.ToUpper(strings.TrimSpace(s)) {
	case "TRACE":
		return zerolog.TraceLevel, nil
	case "DEBUG":
		return zerolog.DebugLevel, nil
	case "INFO":
		return zerolog.InfoLevel, nil
	case "WARN":
		return zerolog.WarnLevel, nil
	case "ERROR":
		return zerolog.ErrorLevel, nil
	}
	return zerolog.NoLevel, fmt.Errorf("invalid log level %q: valid levels are %s", s, strings.Join(LevelNames, ", "))
}

// envLevel reads a level from the environment, with a default.
func envLevel(name string, def zerolog.Level) (zerolog.Level, error) {
	v := os.Getenv(name)
	if v == "" {
		return def, nil
	}
	l, err := ParseLevel(v)
	if err != nil {
		return l, fmt.Errorf("%s: %w", name, err)
	}
	return l, nil
}

// CheckLevels validates MONARCH_FILE_LOG and MONARCH_STDERR_LOG.
func CheckLevels() error {
	if _, err := envLevel(EnvFileLevel, zerolog.InfoLevel); err != nil {
		return err
	}
	_, err := envLevel(EnvStderrLevel, zerolog.WarnLevel)
	return err
}

// EnvSystemLogDir, when set, is the system logs' directory instead of
// /tmp/$USER.
const EnvSystemLogDir = "MONARCH_SYSLOG_DIR"

// SystemLogDir is $MONARCH_SYSLOG_DIR, else /tmp/$USER (in $TMPDIR if
// set).
func SystemLogDir() string {
	if d := os.Getenv(EnvSystemLogDir); d != "" {
		return d
	}
	name := os.Getenv("USER")
	if name == "" {
		if u, err := user.Current(); err == nil {
			name = u.Username
		} else {
			name = fmt.Sprint(os.Getuid())
		}
	}
	return filepath.Join(os.TempDir(), name)
}

// SystemLogPath is the system log of one process of a job.
func SystemLogPath(dir, job, role string) string {
	return filepath.Join(dir, "monarch_"+job+"_"+role+".log")
}

// SystemLogger opens the system log of one process of a job. role names
// the process: client, agent-h0, proc-c-3, launcher. The file is created
// when the first message at its level is written (most runs write none,
// and leave no file). An existing SystemLogDir that is not private (a
// symbolic link, another user's, writable by others) is refused now, with
// the error saying how to fix it. Close the returned closer at exit.
func SystemLogger(job, role string) (zerolog.Logger, io.Closer, error) {
	fileLevel, err := envLevel(EnvFileLevel, zerolog.InfoLevel)
	if err != nil {
		return zerolog.Nop(), nil, err
	}
	errLevel, err := envLevel(EnvStderrLevel, zerolog.WarnLevel)
	if err != nil {
		return zerolog.Nop(), nil, err
	}
	dir := SystemLogDir()
	if err := privfs.CheckDir(dir); err != nil {
		return zerolog.Nop(), nil, fmt.Errorf("system log: %w", err)
	}
	f := &lazyFile{dir: dir, path: SystemLogPath(dir, job, role), errOut: os.Stderr}
	stderr := zerolog.ConsoleWriter{Out: os.Stderr, NoColor: true, TimeFormat: time.TimeOnly}
	w := zerolog.MultiLevelWriter(levelWriter{f, fileLevel}, levelWriter{stderr, errLevel})
	l := zerolog.New(w).Level(min(fileLevel, errLevel)).With().Timestamp().Str("role", role).Logger()
	return l, f, nil
}

// lazyFile creates its file (and dir) on the first write. If that fails,
// it says so once on errOut and drops what is written: a program does not
// stop for its system log.
type lazyFile struct {
	dir, path string
	errOut    io.Writer

	mu     sync.Mutex
	f      *os.File
	failed bool
	closed bool
}

func (l *lazyFile) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil && !l.failed && !l.closed {
		f, err := openSystemLog(l.dir, l.path)
		if err != nil {
			l.failed = true
			fmt.Fprintf(l.errOut, "monarch: no system log: %v\n", err)
		}
		l.f = f
	}
	if l.f == nil {
		return len(p), nil
	}
	return l.f.Write(p)
}

func openSystemLog(dir, path string) (*os.File, error) {
	if err := privfs.Dir(dir); err != nil {
		return nil, err
	}
	return privfs.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
}

// Close closes the file, if it was ever opened.
func (l *lazyFile) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closed = true
	if l.f == nil {
		return nil
	}
	err := l.f.Close()
	l.f = nil
	return err
}

// levelWriter passes on the events at or above its level.
type levelWriter struct {
	w   io.Writer
	min zerolog.Level
}

func (l levelWriter) Write(p []byte) (int, error) { return l.w.Write(p) }

func (l levelWriter) WriteLevel(level zerolog.Level, p []byte) (int, error) {
	if level < l.min {
		return len(p), nil
	}
	return l.w.Write(p)
}
