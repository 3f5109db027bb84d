package jobenv

import (
	"io"

	"github.com/monarch-go/monarch/logagg"
	"github.com/rs/zerolog"
)

// LauncherLogRole is the role of the launcher's own system log: what the
// processes it starts to hold the host agents (srun, ssh) say of
// themselves goes there, not to the user's terminal.
const LauncherLogRole = "launcher"

// SystemLogger is logagg.SystemLogger, for the launcher: launch may not
// import logagg (see deps_test.go), and where a job's processes keep their
// system logs is part of the job's contract.
func SystemLogger(job, role string) (zerolog.Logger, io.Closer, error) {
	return logagg.SystemLogger(job, role)
}

// SystemLogPath is where process role of job keeps its system log.
func SystemLogPath(job, role string) string {
	return logagg.SystemLogPath(logagg.SystemLogDir(), job, role)
}
