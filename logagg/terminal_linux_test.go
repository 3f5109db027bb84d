package logagg_test

import (
	"os"
	"strconv"
	"syscall"
	"testing"
	"unsafe"
)

// openTerminal opens a new pseudo-terminal and returns its terminal end,
// or nil when the system has none to give.
func openTerminal(t *testing.T) *os.File {
	t.Helper()
	ptm, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Logf("no pseudo-terminal: %v", err)
		return nil
	}
	t.Cleanup(func() { ptm.Close() })
	var unlock int32
	if _, _, errno := syscall.Syscall(syscall.SYS_IOCTL, ptm.Fd(), syscall.TIOCSPTLCK, uintptr(unsafe.Pointer(&unlock))); errno != 0 {
		t.Logf("no pseudo-terminal: unlock: %v", errno)
		return nil
	}
	var n uint32
	if _, _, errno := syscall.Syscall(syscall.SYS_IOCTL, ptm.Fd(), syscall.TIOCGPTN, uintptr(unsafe.Pointer(&n))); errno != 0 {
		t.Logf("no pseudo-terminal: number: %v", errno)
		return nil
	}
	pts, err := os.OpenFile("/dev/pts/"+strconv.Itoa(int(n)), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Logf("no pseudo-terminal: %v", err)
		return nil
	}
	t.Cleanup(func() { pts.Close() })
	return pts
}
