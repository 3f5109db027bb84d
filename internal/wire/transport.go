package wire

import (
	"fmt"
	"math"
)

// The reliable-delivery layer's own frames (KindNak, KindAck) carry small
// bodies, written and read by hand like the header: every length and
// number is checked before it is used.

// Span is the body of a KindNak frame: the numbers Lo..Hi.
type Span struct{ Lo, Hi uint64 }

// AppendSpan appends a Span's body.
func AppendSpan(b []byte, s Span) []byte {
	return appendUint(appendUint(appendArrayLen(b, 2), s.Lo), s.Hi)
}

// ReadSpan reads a Span's body: two numbers, 1 <= Lo <= Hi.
func ReadSpan(p []byte) (Span, error) {
	r := mpReader{b: p}
	n := r.arrayLen()
	s := Span{Lo: r.uint(), Hi: r.uint()}
	switch {
	case r.err != nil:
		return s, fmt.Errorf("%w: span: %v", ErrDecode, r.err)
	case n != 2 || len(r.b) != 0:
		return s, fmt.Errorf("%w: span of %d numbers (%d bytes after)", ErrDecode, n, len(r.b))
	case s.Lo == 0 || s.Lo > s.Hi:
		return s, fmt.Errorf("%w: span %d..%d", ErrDecode, s.Lo, s.Hi)
	}
	return s, nil
}

// MaxAcks bounds the subjects one KindAck frame acknowledges.
const MaxAcks = 1 << 16

// Acks is the body of a KindAck frame: for each subject key, the number
// acknowledged.
type Acks struct {
	Keys []string
	Seqs []uint64
}

// AppendAcks appends an Acks body: key, number, key, number, ...
func AppendAcks(b []byte, a *Acks) []byte {
	b = appendArrayLen(b, 2*len(a.Keys))
	for i, k := range a.Keys {
		b = appendUint(appendString(b, k), a.Seqs[i])
	}
	return b
}

// ReadAcks reads an Acks body. Its keys share p. Every key must be a
// subject key (ValidKey), every number positive.
func ReadAcks(p []byte) (Acks, error) {
	r := mpReader{b: p}
	n := r.arrayLen()
	var a Acks
	switch {
	case r.err != nil:
		return a, fmt.Errorf("%w: acks: %v", ErrDecode, r.err)
	case n <= 0 || n%2 != 0 || n > 2*MaxAcks || n > len(r.b):
		// A pair takes two bytes at least.
		return a, fmt.Errorf("%w: acks of %d values in %d bytes", ErrDecode, n, len(r.b))
	}
	a.Keys, a.Seqs = make([]string, 0, n/2), make([]uint64, 0, n/2)
	for range n / 2 {
		k, s := r.str(), r.uint()
		if r.err != nil {
			return Acks{}, fmt.Errorf("%w: acks: %v", ErrDecode, r.err)
		}
		if !ValidKey(k) || s == 0 || s == math.MaxUint64 {
			return Acks{}, fmt.Errorf("%w: ack of %.40q up to %d", ErrDecode, k, s)
		}
		a.Keys, a.Seqs = append(a.Keys, k), append(a.Seqs, s)
	}
	if len(r.b) != 0 {
		return Acks{}, fmt.Errorf("%w: acks: %d bytes after", ErrDecode, len(r.b))
	}
	return a, nil
}

// ValidKey reports whether s is a sequenced subject's key: "proc." or
// "mesh." and an id.
func ValidKey(s string) bool {
	if len(s) < 6 || s[:5] != "proc." && s[:5] != "mesh." {
		return false
	}
	return ValidID(s[5:])
}

// AppendRelease appends a KindRelease body: the payload's id.
func AppendRelease(b []byte, id uint64) []byte { return appendUint(b, id) }

// ReadRelease reads a KindRelease body: a positive id, nothing after.
func ReadRelease(p []byte) (uint64, error) {
	r := mpReader{b: p}
	id := r.uint()
	if r.err != nil || id == 0 || len(r.b) != 0 {
		return 0, fmt.Errorf("%w: release of payload %d (%d bytes after): %v", ErrDecode, id, len(r.b), r.err)
	}
	return id, nil
}
