package bus

import (
	"encoding/binary"
	"strconv"
	"testing"

	"github.com/nats-io/nats.go"
)

// benchConn is a Conn with only what deliver needs: no server.
func benchConn() *Conn {
	return &Conn{partials: map[string]*partial{}, maxMessage: DefaultMaxMessage, maxReassembly: DefaultMaxReassembly}
}

// BenchmarkDeliverBatch unpacks a batch of 500 small messages.
func BenchmarkDeliverBatch(b *testing.B) {
	c := benchConn()
	var buf []byte
	for i := 0; i < 500; i++ {
		buf = binary.AppendUvarint(buf, 100)
		buf = append(buf, make([]byte, 100)...)
	}
	m := &nats.Msg{Subject: "s", Data: buf, Header: nats.Header{batchHeader: []string{"500"}}}
	n := 0
	b.SetBytes(int64(len(buf)))
	for b.Loop() {
		c.deliver(m, func(Message) { n++ })
	}
	if n != 500*b.N {
		b.Fatalf("%d messages, want %d", n, 500*b.N)
	}
}

// BenchmarkDeliverChunked reassembles a 16 MiB message from 16 parts.
func BenchmarkDeliverChunked(b *testing.B) {
	c := benchConn()
	const part, count = 1 << 20, 16
	parts := make([]*nats.Msg, count)
	for i := range parts {
		parts[i] = &nats.Msg{Subject: "s", Data: make([]byte, part),
			Header: nats.Header{chunkHeader: []string{"x " + strconv.Itoa(i) + " " + strconv.Itoa(count) + " " + strconv.Itoa(part*count)}}}
	}
	got := 0
	b.SetBytes(part * count)
	for b.Loop() {
		for _, m := range parts {
			c.deliver(m, func(m Message) { got += len(m.Data) })
		}
	}
	if got != part*count*b.N {
		b.Fatalf("%d bytes, want %d", got, part*count*b.N)
	}
}
