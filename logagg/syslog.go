package logagg

import (
	"fmt"
	"io"
	"os"
	"os/user"
	"path/filepath"
	"strings"
	"time"

	"github.com/rs/zerolog"
)

// System logs: monarch's own messages, never the user's output. Each
// process of a job writes them to /tmp/$USER/monarch_<job>_<role>.log
// (folder 0700, file 0600) at the level of MONARCH_FILE_LOG (default
// INFO), and the more urgent ones to stderr at MONARCH_STDERR_LOG
// (default WARN).

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

// SystemLogDir is /tmp/$USER.
func SystemLogDir() string {
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

// SystemLogger opens the system log of one process of a job. role names
// the process: client, agent-h0, proc-c-3, launcher. Close the returned
// closer at exit.
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
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return zerolog.Nop(), nil, fmt.Errorf("system log dir: %w", err)
	}
	os.Chmod(dir, 0o700)
	path := filepath.Join(dir, "monarch_"+job+"_"+role+".log")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return zerolog.Nop(), nil, fmt.Errorf("system log: %w", err)
	}
	stderr := zerolog.ConsoleWriter{Out: os.Stderr, NoColor: true, TimeFormat: time.TimeOnly}
	w := zerolog.MultiLevelWriter(levelWriter{f, fileLevel}, levelWriter{stderr, errLevel})
	l := zerolog.New(w).Level(min(fileLevel, errLevel)).With().Timestamp().Str("role", role).Logger()
	return l, f, nil
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
