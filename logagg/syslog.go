package logagg

import (
	"errors"
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
// written to it; PruneSystemLogs removes old ones. A folder another user
// squatted is stepped around (UseSystemLogDir), never a reason to stop.

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
// and leave no file). Its folder is UseSystemLogDir's: one another user
// squatted is replaced by a fresh private one, said once on stderr. Only a
// bad level is an error; without any folder to write in, the messages go
// to stderr alone. Close the returned closer at exit.
func SystemLogger(job, role string) (zerolog.Logger, io.Closer, error) {
	fileLevel, err := envLevel(EnvFileLevel, zerolog.InfoLevel)
	if err != nil {
		return zerolog.Nop(), nil, err
	}
	errLevel, err := envLevel(EnvStderrLevel, zerolog.WarnLevel)
	if err != nil {
		return zerolog.Nop(), nil, err
	}
	f := &lazyFile{job: job, role: role, errOut: os.Stderr}
	if f.dir, err = UseSystemLogDir(os.Stderr); err != nil {
		f.failed = true
		fmt.Fprintf(os.Stderr, "monarch: no system log: %v\n", err)
	}
	stderr := zerolog.ConsoleWriter{Out: os.Stderr, NoColor: true, TimeFormat: time.TimeOnly}
	w := zerolog.MultiLevelWriter(levelWriter{f, fileLevel}, levelWriter{stderr, errLevel})
	l := zerolog.New(w).Level(min(fileLevel, errLevel)).With().Timestamp().Str("role", role).Logger()
	return l, f, nil
}

// UseSystemLogDir returns the folder of this process's system logs:
// SystemLogDir, when it is missing or private. When another user squatted
// it (a folder of theirs, a link, one others can write, or one in a folder
// where they can rename it), which would otherwise stop every process of
// the user's jobs on this host, a fresh private folder is made in its
// place (privfs.Fresh) and set in EnvSystemLogDir, and w is told once
// where the logs go and why: later calls, and the children of this
// process (a launcher's client and agents, an agent's procs), use it and
// say nothing. A launcher calls it before it starts the job's processes,
// so that they share one. The error says why there is no folder at all.
func UseSystemLogDir(w io.Writer) (string, error) {
	return replaceSystemLogDir(SystemLogDir(), nil, w)
}

// replacing serialises the replacements of a process's system log folder:
// one fresh folder for all its loggers.
var replacing sync.Mutex

// replaceSystemLogDir is the folder to use for dir: dir itself unless it
// is squatted, or refused already (refused, not nil: a file in it could
// not be opened safely); then a fresh private one, unless another logger
// of this process replaced it already.
func replaceSystemLogDir(dir string, refused error, w io.Writer) (string, error) {
	replacing.Lock()
	defer replacing.Unlock()
	if cur := SystemLogDir(); cur != dir && privfs.CheckDir(cur) == nil {
		return cur, nil
	}
	use, squatted, err := privfs.Replace(dir)
	if refused != nil && err == nil && squatted == nil {
		squatted = refused
		use, err = privfs.Fresh(dir)
	}
	if err != nil || squatted == nil {
		return use, err
	}
	if err := os.Setenv(EnvSystemLogDir, use); err != nil {
		return "", err
	}
	host, _ := os.Hostname()
	fmt.Fprintf(w, "monarch: system logs on %s go to %s instead: %v\n", host, use, squatted)
	return use, nil
}

// lazyFile creates its file (and dir) on the first write. If that fails,
// it says so once on errOut and drops what is written: a program does not
// stop for its system log.
type lazyFile struct {
	dir, job, role string
	errOut         io.Writer

	mu     sync.Mutex
	f      *os.File
	failed bool
	closed bool
}

func (l *lazyFile) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil && !l.failed && !l.closed {
		f, err := l.open()
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

// open creates the file in its folder; a folder squatted since the
// logger was made is stepped around as UseSystemLogDir does.
func (l *lazyFile) open() (*os.File, error) {
	f, err := openSystemLog(l.dir, l.job, l.role)
	if !errors.Is(err, privfs.ErrUnsafe) {
		return f, err
	}
	if l.dir, err = replaceSystemLogDir(l.dir, err, l.errOut); err != nil {
		return nil, err
	}
	return openSystemLog(l.dir, l.job, l.role)
}

func openSystemLog(dir, job, role string) (*os.File, error) {
	if err := privfs.Dir(dir); err != nil {
		return nil, err
	}
	return privfs.OpenFile(SystemLogPath(dir, job, role), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
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
