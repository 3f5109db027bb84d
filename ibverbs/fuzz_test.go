package ibverbs

import (
	"encoding/binary"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/monarch-go/monarch/internal/door"
)

// FuzzServeConn: whatever bytes a peer sends the buffer server, it
// answers or hangs up, never panics, and ends when the peer does; the
// buffer it serves is only written where a well-formed write says.
func FuzzServeConn(f *testing.F) {
	req := func(op byte, key, off, n uint64, tail ...byte) []byte {
		b := make([]byte, headerLen)
		b[0] = op
		binary.LittleEndian.PutUint64(b[1:], key)
		binary.LittleEndian.PutUint64(b[9:], off)
		binary.LittleEndian.PutUint64(b[17:], n)
		return append(b, tail...)
	}
	f.Add(req('r', 1, 0, 8))
	f.Add(req('w', 1, 4, 2, 9, 9))
	f.Add(req('a', 1, 8, 16, make([]byte, 16)...))
	f.Add(req('c', 1, 8, 16, make([]byte, 16)...))
	f.Add(req('q', 1, 0, 26, make([]byte, 26)...))
	f.Add(req('r', 1, 1<<62, 1<<62))
	f.Add(req('x', 0, 0, 0))
	f.Add(req('W', 1, 16, 4, append(make([]byte, 16), 1, 2, 3, 4)...))
	f.Add(req('W', 1, 16, 4, append([]byte{16, 0, 0, 0, 0, 0, 0, 0}, make([]byte, 12)...)...))
	f.Add(req('W', 1, 16, 1<<40, make([]byte, 16)...))
	f.Add(req('k', 1, 7, 0))                     // handed over: waits for Accept
	f.Add(req('k', 1, 7, 0, 'r'))                // bytes after it: hang up
	f.Add(req('k', 1, 7, 8, make([]byte, 8)...)) // a length: hang up
	f.Add(req('k', 2, 7, 0))                     // no such buffer: refused
	// Requests back to back (the next already buffered when the server
	// waits for it), a header cut short, a write's body cut short.
	f.Add(append(req('r', 1, 0, 8), req('a', 1, 8, 16, make([]byte, 16)...)...))
	f.Add(req('r', 1, 0, 8)[:10])
	f.Add(req('w', 1, 0, 8, 1, 2, 3))
	// At the door: a first request naming no buffer (answered, then the
	// connection closed, whatever follows), of each kind; one that names
	// the buffer, then one that does not (answered, and served on); a
	// read of nothing at the buffer's end (Handle.Check).
	f.Add(append(req('r', 2, 0, 8), req('r', 1, 0, 8)...))
	f.Add(req('w', 2, 0, 1<<40, 1, 2, 3))
	f.Add(req('a', 2, 8, 16, make([]byte, 16)...))
	f.Add(req('W', 2, 16, 4, make([]byte, 20)...))
	f.Add(req('q', 2, 0, 26, make([]byte, 26)...))
	f.Add(append(req('r', 1, 0, 8), req('r', 2, 0, 8)...))
	f.Add(req('r', 1, 64, 0))
	f.Add(req('r', 1, 65, 0))
	b, err := NewBuffer(64)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { b.Close() })
	srv, err := thisProcess().newServer("fuzz", "", defaultServerLimits)
	if err != nil {
		f.Fatal(err)
	}
	// The server's door reads a pipe (no socket to hold) at once; done
	// says when the server is done with each.
	var done sync.Map // the pipe's server end -> chan struct{}
	d, err := door.New(door.Config{Name: "fuzz", Limits: door.Limits{Prove: authBound, Hold: holdBound, Held: 1, Reading: 64, PerSource: 64},
		Serve: func(c *door.Conn) {
			srv.serveConn(c)
			if ch, ok := done.LoadAndDelete(c.Conn); ok {
				close(ch.(chan struct{}))
			}
		}})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(d.Close)
	serveNow := func(c net.Conn) {
		ch := make(chan struct{})
		done.Store(c, ch)
		d.Enter(c)
		<-ch
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		// Requests name the buffer by key: make key 1 this buffer's.
		if len(data) >= 9 && binary.LittleEndian.Uint64(data[1:9]) == 1 {
			binary.LittleEndian.PutUint64(data[1:9], b.handle.Key)
		}
		server, client := net.Pipe()
		done := make(chan struct{})
		go func() { serveNow(server); close(done) }()
		go io.Copy(io.Discard, client) // its answers
		client.SetWriteDeadline(time.Now().Add(time.Second))
		client.Write(data)
		client.Close()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatalf("the server did not end after its peer hung up, on %x", data)
		}
	})
}
