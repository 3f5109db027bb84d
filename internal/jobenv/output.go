package jobenv

import (
	"os"
	"syscall"
)

// OutputVar tells a client whose own stdout and stderr its launcher
// captures (to record them in the job's log, as the client's lines) where
// to print its procs' lines instead: "3,4", the descriptors of the
// launcher's own stdout and stderr, passed on. Lines printed there are
// not the client program's, and are not captured again.
const OutputVar = "MONARCH_CLIENT_OUTPUT"

// OutputFDs is the value of OutputVar the launcher sets: its stdout and
// stderr are the client's first two extra files (exec.Cmd.ExtraFiles).
const OutputFDs = "3,4"

// OutputEnd is the line a client whose output is captured writes last to
// its stdout and to its stderr: the launcher does not pass it on but
// publishes it like the others, so that the client knows, once it has
// received it from both, that every line it wrote before is in the job's
// log.
const OutputEnd = "\x00monarch: end of the client's output\x00"

// ClientOutput returns the files the client prints its procs' lines to:
// those OutputVar names, or os.Stdout and os.Stderr; captured says the
// former. It unsets the variable and keeps the files from the client's
// own children (close on exec), so that only this process takes them.
func ClientOutput() (stdout, stderr *os.File, captured bool) {
	v := os.Getenv(OutputVar)
	os.Unsetenv(OutputVar)
	if v != OutputFDs {
		return os.Stdout, os.Stderr, false
	}
	for _, fd := range []int{3, 4} {
		var st syscall.Stat_t
		if syscall.Fstat(fd, &st) != nil {
			return os.Stdout, os.Stderr, false // not open: a wrong variable
		}
	}
	syscall.CloseOnExec(3)
	syscall.CloseOnExec(4)
	return os.NewFile(3, "launcher stdout"), os.NewFile(4, "launcher stderr"), true
}
