package actorrt

import (
	"unsafe"

	"github.com/monarch-go/monarch/internal/delivery"
)

// Recyclable is the element of a slice Recycle takes: a fixed-size number.
type Recyclable interface {
	~uint8 | ~uint16 | ~uint32 | ~uint64 | ~int8 | ~int16 | ~int32 | ~int64 | ~float32 | ~float64
}

// Recycle gives back to this process's runtime the memory of the large
// message s arrived in (a result, or an endpoint's argument: a []byte or
// numeric slice of it, of 64 KiB or more, that refers to the message in
// place), so that a later large message of about its size is read into
// it. A message past 256 KiB travels out of band (see WithMaxMessage) and
// is read into memory of its own, and on a virtual machine most of the
// time that takes can be the kernel faulting fresh memory in, page by
// page (hundreds of milliseconds for 64 MiB, more or less at random): a
// loop that receives large results of about one size and gives each back
// once done with it receives into memory already faulted in, as a stream
// reads into the buffer it keeps.
//
// It reports whether the runtime took the memory: not if s is no part of
// a message read out of band, or its message was given back already, or
// the runtime would keep more than 256 MiB so; what it keeps is let go to
// the garbage collector after 30 seconds without use. After Recycle
// returns true, no value decoded from that message (s, a slice of it,
// another field of the same result) may be used: the runtime writes into
// its memory. A message never given back is the program's, as any value.
func Recycle[S ~[]E, E Recyclable](s S) bool {
	if len(s) == 0 {
		return false
	}
	var e E
	return delivery.Recycle(unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), len(s)*int(unsafe.Sizeof(e))))
}
