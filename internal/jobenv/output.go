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

// ClientOutput returns the files the client prints its procs' lines to:
// those OutputVar names, or os.Stdout and os.Stderr. It unsets the
// variable and keeps the files from the client's own children (close on
// exec), so that only this process takes them.
func ClientOutput() (stdout, stderr *os.File) {
	v := os.Getenv(OutputVar)
	os.Unsetenv(OutputVar)
	if v != OutputFDs {
		return os.Stdout, os.Stderr
	}
	for _, fd := range []int{3, 4} {
		var st syscall.Stat_t
		if syscall.Fstat(fd, &st) != nil {
			return os.Stdout, os.Stderr // not open: a wrong variable
		}
	}
	syscall.CloseOnExec(3)
	syscall.CloseOnExec(4)
	return os.NewFile(3, "launcher stdout"), os.NewFile(4, "launcher stderr")
}
