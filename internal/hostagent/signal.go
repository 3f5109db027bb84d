package hostagent

import (
	"bytes"
	"os"
	"strconv"
	"syscall"
)

// catches reports whether process pid has a handler for sig: its SigCgt
// mask in /proc/<pid>/status has sig's bit. A notice signal (SIGUSR1 by
// default) ends a process that neither catches nor ignores it, so it is
// sent only to those that wait for it. When the mask cannot be read (the
// process is gone, no /proc) the answer is false: no notice is better
// than a notice that kills.
func catches(pid int, sig syscall.Signal) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return false
	}
	mask, ok := statusMask(b, "SigCgt:")
	return ok && sig >= 1 && sig <= 64 && mask&(1<<(sig-1)) != 0
}

// statusMask reads a hex mask field (SigCgt:, SigIgn:) of a
// /proc/<pid>/status file.
func statusMask(status []byte, field string) (uint64, bool) {
	for line := range bytes.Lines(status) {
		v, ok := bytes.CutPrefix(line, []byte(field))
		if !ok {
			continue
		}
		mask, err := strconv.ParseUint(string(bytes.TrimSpace(v)), 16, 64)
		return mask, err == nil
	}
	return 0, false
}
