package actortest

import (
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// linkProxy stands on a simulated host's link to the hub (its leaf dials
// the hub through it): cut closes every connection and refuses new ones
// until healed, and delay holds every byte crossing it, both ways, for a
// while before it passes.
type linkProxy struct {
	ln     net.Listener
	target string
	delay  atomic.Int64 // time.Duration

	mu    sync.Mutex
	conns map[net.Conn]bool
	down  bool
	wg    sync.WaitGroup // the pumps
}

func newLinkProxy(target string) (*linkProxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &linkProxy{ln: ln, target: target, conns: map[net.Conn]bool{}}
	p.wg.Add(1)
	go p.serve()
	return p, nil
}

func (p *linkProxy) addr() string { return p.ln.Addr().String() }

func (p *linkProxy) serve() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.DialTimeout("tcp", p.target, 5*time.Second)
		p.mu.Lock()
		if err != nil || p.down {
			p.mu.Unlock()
			c.Close()
			if s != nil {
				s.Close()
			}
			continue
		}
		p.conns[c], p.conns[s] = true, true
		p.wg.Add(2)
		p.mu.Unlock()
		go p.pump(s, c)
		go p.pump(c, s)
	}
}

// chunk is what a pump read, and when.
type chunk struct {
	at   time.Time
	data []byte
}

// pump copies from src to dst, each chunk held for the proxy's delay (as
// it was when the chunk was read); the first error on either side closes
// both.
func (p *linkProxy) pump(dst, src net.Conn) {
	defer p.wg.Done()
	chunks := make(chan chunk, 256)
	go func() {
		defer close(chunks)
		buf := make([]byte, 32<<10)
		for {
			n, err := src.Read(buf)
			if n > 0 {
				chunks <- chunk{time.Now().Add(time.Duration(p.delay.Load())), append([]byte(nil), buf[:n]...)}
			}
			if err != nil {
				return
			}
		}
	}()
	defer func() {
		p.forget(dst, src)
		for range chunks { // the reader ends once src is closed
		}
	}()
	for c := range chunks {
		if wait := time.Until(c.at); wait > 0 {
			time.Sleep(wait)
		}
		if _, err := dst.Write(c.data); err != nil {
			return
		}
	}
}

func (p *linkProxy) forget(conns ...net.Conn) {
	p.mu.Lock()
	for _, c := range conns {
		delete(p.conns, c)
	}
	p.mu.Unlock()
	for _, c := range conns {
		c.Close()
	}
}

// cut closes every connection and refuses new ones until heal.
func (p *linkProxy) cut() {
	p.mu.Lock()
	p.down = true
	conns := make([]net.Conn, 0, len(p.conns))
	for c := range p.conns {
		conns = append(conns, c)
	}
	p.mu.Unlock()
	for _, c := range conns {
		c.Close()
	}
}

func (p *linkProxy) heal() {
	p.mu.Lock()
	p.down = false
	p.mu.Unlock()
}

// close cuts for good and waits for the pumps.
func (p *linkProxy) close() {
	p.ln.Close()
	p.cut()
	p.wg.Wait()
}
