package delivery

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// madvPopulateWrite is MADV_POPULATE_WRITE (Linux 5.14): fault every page
// of a range in now, in one call.
const madvPopulateWrite = 23

// payloadMemory is memory for a payload read out of band, of size bytes.
// Memory the process never touched costs a page fault per page on first
// write, and that is most of the time a large payload takes on a virtual
// machine whose faults are slow (a 64 MiB read: ~90-500 ms there, ~3 ms
// once warm). Large ones are asked to come in huge pages and faulted in
// at once; the advice is only advice (an older kernel ignores it, and
// the first write faults the pages in then). Memory the program gave back
// (Recycle) is faulted in already and taken first.
func payloadMemory(size int) []byte {
	if b := recycled.take(size); b != nil {
		return b
	}
	b := make([]byte, size)
	if size < 32<<20 {
		return recycled.fresh(b)
	}
	const huge = 2 << 20
	p := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	start, end := (p+huge-1)&^(huge-1), (p+uintptr(size))&^(huge-1)
	if end > start {
		inner := b[start-p : end-p]
		unix.Madvise(inner, unix.MADV_HUGEPAGE)
		unix.Madvise(inner, madvPopulateWrite)
	}
	return recycled.fresh(b)
}
