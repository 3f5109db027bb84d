// Package procid tells whether a process recorded earlier (in a job's
// state or log) still runs. A pid alone is not enough: once the process
// has exited, the system may give its pid to another one. So the record
// also keeps the process's start time, and a process with that pid but
// another start time is a different one.
package procid

import (
	"bytes"
	"errors"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// Start returns the start time of process pid (Linux: clock ticks since
// boot, from /proc/<pid>/stat), or "" where it cannot be read (no /proc,
// no such process).
func Start(pid int) string {
	start, _, _ := stat(pid)
	return start
}

// Gone reports whether the process pid that started at start has exited.
// start "" (not recorded) checks the pid only. A zombie counts as gone: it
// has exited and only waits for its parent.
func Gone(pid int, start string) bool {
	if pid <= 0 {
		return true
	}
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return true
	}
	st, state, ok := stat(pid)
	if !ok {
		return false // no /proc: the pid is all we have, and it runs
	}
	return state == 'Z' || state == 'X' || start != "" && st != start
}

// stat reads the start time and the state of process pid from
// /proc/<pid>/stat; ok is false where there is no /proc or no such
// process.
func stat(pid int) (start string, state byte, ok bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return "", 0, false
	}
	// pid (comm) state ppid ... : comm may hold spaces and parentheses, so
	// the fields are counted from the last ')'. starttime is field 22, the
	// 20th after comm.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return "", 0, false
	}
	fields := strings.Fields(string(b[i+1:]))
	if len(fields) < 20 || len(fields[0]) != 1 {
		return "", 0, false
	}
	return fields[19], fields[0][0], true
}
