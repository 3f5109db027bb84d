package procstat

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// Stat is a process as /proc/PID/stat describes it.
type Stat struct {
	// State is the one-letter state: R running, S sleeping, T stopped,
	// t traced, Z zombie, ...
	State byte
	PPID  int
	// CPUTicks is the user and system time the process itself used, in
	// clock ticks (USER_HZ, 100 a second on Linux); its children's are
	// not counted.
	CPUTicks int64
	// RSS is its resident memory, in bytes (0 if /proc does not say).
	RSS int64
}

// Stopped reports whether the process is stopped (SIGSTOP) or traced.
func (s Stat) Stopped() bool { return s.State == 'T' || s.State == 't' }

// Read reads /proc/PID/stat.
func Read(pid int) (Stat, error) {
	path := fmt.Sprintf("/proc/%d/stat", pid)
	b, err := os.ReadFile(path)
	if err != nil {
		return Stat{}, err
	}
	return parse(path, b)
}

func parse(path string, b []byte) (Stat, error) {
	// "pid (comm) S ppid ...": comm may hold spaces and parentheses, so
	// the fields are counted from the last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return Stat{}, fmt.Errorf("%s: no ')' after the command name", path)
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] state, f[1] ppid, f[11] utime, f[12] stime (fields 3, 4, 14
	// and 15 of proc(5)).
	if len(f) < 13 || len(f[0]) != 1 {
		return Stat{}, fmt.Errorf("%s: %d fields after the command name, want at least 13", path, len(f))
	}
	ppid, err1 := strconv.Atoi(f[1])
	utime, err2 := strconv.ParseInt(f[11], 10, 64)
	stime, err3 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil {
		return Stat{}, fmt.Errorf("%s: ppid %q, utime %q, stime %q", path, f[1], f[11], f[12])
	}
	st := Stat{State: f[0][0], PPID: ppid, CPUTicks: utime + stime}
	// f[21] is rss, in pages (field 24).
	if len(f) > 21 {
		if pages, err := strconv.ParseInt(f[21], 10, 64); err == nil {
			st.RSS = pages * int64(os.Getpagesize())
		}
	}
	return st, nil
}

// Children lists the processes whose parent is pid, as /proc says now.
func Children(pid int) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []int
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, err := Read(p); err == nil && st.PPID == pid {
			out = append(out, p)
		}
	}
	return out
}
