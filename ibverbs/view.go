package ibverbs

import (
	"fmt"
	"unsafe"
)

// Elem is a type a buffer can be viewed as: fixed-size numbers, laid out
// as this machine lays them out (little-endian on every platform monarch
// builds for), so that a view's bytes are what crosses the wire.
type Elem interface {
	~int8 | ~uint8 | ~int16 | ~uint16 | ~int32 | ~uint32 | ~int64 | ~uint64 | ~float32 | ~float64
}

// View is the buffer's memory as a []T, no copy: writes through it are
// the buffer's bytes. The buffer's size must be a multiple of T's, and
// its memory aligned for T (NewBuffer's always is; Register's is unless
// the program's slice is not).
func View[T Elem](b *Buffer) ([]T, error) {
	b.mu.RLock()
	mem := b.mem
	b.mu.RUnlock()
	if mem == nil {
		return nil, ErrClosed
	}
	return viewOf[T](mem)
}

func viewOf[T Elem](mem []byte) ([]T, error) {
	var zero T
	size, align := int(unsafe.Sizeof(zero)), uintptr(unsafe.Alignof(zero))
	switch {
	case len(mem)%size != 0:
		return nil, fmt.Errorf("%w: a buffer of %d bytes is not a whole number of %T (%d bytes)", ErrRange, len(mem), zero, size)
	case uintptr(unsafe.Pointer(unsafe.SliceData(mem)))%align != 0:
		return nil, fmt.Errorf("%w: the buffer's memory is not aligned for %T", ErrRange, zero)
	}
	return unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(mem))), len(mem)/size), nil
}

// Bytes is s's memory as bytes, no copy: what ReadAt, WriteAt and
// Register take, so that a []float32 moves as its raw bytes. Element i
// of s is at byte i*sizeof(T).
func Bytes[T Elem](s []T) []byte {
	if len(s) == 0 {
		return nil
	}
	var zero T
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), len(s)*int(unsafe.Sizeof(zero)))
}
