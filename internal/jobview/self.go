package jobview

import "github.com/monarch-go/monarch/internal/procstat"

// ReadSelf is process pid's CPU time (USER_HZ ticks) and resident memory
// (bytes), as a proc tells them in its Figures; zeros if they cannot be
// read.
func ReadSelf(pid int) (cpuTicks, rss int64) {
	st, err := procstat.Read(pid)
	if err != nil {
		return 0, 0
	}
	return st.CPUTicks, st.RSS
}
