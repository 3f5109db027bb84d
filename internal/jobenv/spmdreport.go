package jobenv

import (
	"os"
	"strconv"
	"syscall"
)

// SPMDReportVar names the descriptor on which an SPMD job's client
// (monarch spmd) tells its launcher of each restart of its ranks ([spmd]
// max_restarts): one JSON object a line, which the launcher records for
// monarch status. The launcher sets it for an SPMD job's client only.
const SPMDReportVar = "MONARCH_SPMD_REPORT_FD"

// SPMDReport returns the file SPMDReportVar names, nil when there is
// none. It unsets the variable and keeps the file from the client's own
// children (close on exec), so that the launcher sees its end when the
// client exits.
func SPMDReport() *os.File {
	v := os.Getenv(SPMDReportVar)
	os.Unsetenv(SPMDReportVar)
	fd, err := strconv.Atoi(v)
	if err != nil || fd < 3 {
		return nil
	}
	var st syscall.Stat_t
	if syscall.Fstat(fd, &st) != nil {
		return nil // not open: a wrong variable
	}
	syscall.CloseOnExec(fd)
	return os.NewFile(uintptr(fd), "spmd report")
}
