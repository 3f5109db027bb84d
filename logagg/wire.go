package logagg

import (
	"encoding/binary"
	"errors"
	"time"
)

// A line travels on the bus as one small binary message (the bus batches
// many into one NATS message under load):
//
//	version(1) stream(1) rank(uvarint) unix-nanos(uvarint) len(host) host len(proc) proc [len(mesh) mesh] text
//
// The mesh is there from version 2 on; a version 1 message (an agent of
// an older monarch) has none. Stream 0 marks the end of a proc's output
// (all of it was sent).

const wireVersion = 2

// AppendLine appends l's wire form to b.
func AppendLine(b []byte, l Line) []byte {
	b = append(b, wireVersion, byte(l.Stream))
	b = binary.AppendUvarint(b, uint64(max(l.Rank, 0)))
	b = binary.AppendUvarint(b, uint64(max(l.Time.UnixNano(), 0)))
	b = binary.AppendUvarint(b, uint64(len(l.Host)))
	b = append(b, l.Host...)
	b = binary.AppendUvarint(b, uint64(len(l.Proc)))
	b = append(b, l.Proc...)
	b = binary.AppendUvarint(b, uint64(len(l.Mesh)))
	b = append(b, l.Mesh...)
	return append(b, l.Text...)
}

var errBadLine = errors.New("logagg: bad line message")

// ParseLine decodes a line message.
func ParseLine(b []byte) (Line, error) {
	var l Line
	if len(b) < 2 || b[0] != 1 && b[0] != wireVersion {
		return l, errBadLine
	}
	fields := 2 // host, proc
	if b[0] >= 2 {
		fields = 3 // and mesh
	}
	l.Stream = Stream(b[1])
	b = b[2:]
	rank, n := binary.Uvarint(b)
	if n <= 0 {
		return l, errBadLine
	}
	b = b[n:]
	ns, n := binary.Uvarint(b)
	if n <= 0 {
		return l, errBadLine
	}
	b = b[n:]
	var s [3]string
	for i := range fields {
		k, n := binary.Uvarint(b)
		if n <= 0 || k > uint64(len(b)-n) {
			return l, errBadLine
		}
		s[i] = string(b[n : n+int(k)])
		b = b[n+int(k):]
	}
	l.Rank, l.Time, l.Host, l.Proc, l.Mesh, l.Text = int(rank), time.Unix(0, int64(ns)), s[0], s[1], s[2], string(b)
	return l, nil
}
