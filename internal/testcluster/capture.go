package testcluster

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

const (
	// Past this many bytes of frames a capture records no more and can no
	// longer tell that a needle is absent.
	captureLimit = 512 << 20
	// The veth passes GSO super-frames (up to 64 KiB, more with BIG TCP)
	// unsegmented: a frame longer than this is counted as lost.
	captureFrameMax = 256 << 10
	// Kernel queue for frames the reader has not taken yet: when it is
	// full the kernel drops frames (counted, and Contains then fails).
	captureRcvBuf = 64 << 20
	// How often the blocked reader looks whether Stop was called.
	captureRecvTimeout = 100 * time.Millisecond
	// Stop reads what the kernel had queued for this long at most (a
	// flood faster than the reader would keep it from ever running empty).
	captureDrainMax = time.Second
	// Stop's bound on the reader's end (a bug if reached).
	captureStopWait = 10 * time.Second
	// Frames are copied into blocks of this size (fewer allocations).
	captureBlock = 4 << 20
)

// Capture records the frames crossing one host's link, for tests that
// must show that a secret never crosses the network in the clear. Start
// it with Cluster.Capture; Contains stops it and answers.
type Capture struct {
	t     testing.TB
	host  string
	limit int64 // captureLimit but in tests

	stopping atomic.Bool
	done     chan struct{} // closed when the reader has ended

	frames, bytes atomic.Int64 // recorded

	// Written by the reader only, read after done.
	recorded [][]byte
	block    []byte // the current block recorded frames are copied into
	overflow int    // frames not recorded: past limit
	oversize int    // frames not recorded: longer than captureFrameMax
	drops    uint32 // frames the kernel dropped: the reader fell behind
	cutShort bool   // Stop's draining ended on captureDrainMax, not on an empty queue
	readErr  error

	stopOnce sync.Once
	stuck    bool // the reader did not end within captureStopWait

	reassembly sync.Once
	streams    [][][]byte // TCP byte streams, each as pieces of chunks
}

// Capture starts recording every frame on host's link (its veth peer on
// the bridge, so both directions, whatever the peer), until Stop. Stop is
// also registered with t.Cleanup. Traffic that stays inside the host
// (its loopback) never crosses the link and is not seen.
func (c *Cluster) Capture(t testing.TB, host string) *Capture {
	t.Helper()
	name, err := c.veth(host)
	if err != nil {
		t.Fatal(err)
	}
	ifi, err := net.InterfaceByName(name)
	if err != nil {
		t.Fatalf("capture on %s: %v", host, err)
	}
	fd, err := openPacketSocket(ifi.Index)
	if err != nil {
		t.Fatalf("capture on %s (%s): %v", host, name, err)
	}
	cp := newCapture(t, host)
	go cp.read(fd)
	t.Cleanup(cp.Stop)
	return cp
}

func newCapture(t testing.TB, host string) *Capture {
	return &Capture{t: t, host: host, limit: captureLimit, done: make(chan struct{})}
}

// openPacketSocket opens a raw packet socket receiving every frame of the
// interface ifindex, sent or received.
func openPacketSocket(ifindex int) (int, error) {
	// Protocol 0 at first: the socket receives nothing until bound, not
	// the frames of every interface meanwhile.
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("packet socket: %w", err)
	}
	tv := unix.NsecToTimeval(captureRecvTimeout.Nanoseconds())
	if err = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, captureRcvBuf); err != nil {
		err = fmt.Errorf("SO_RCVBUFFORCE: %w", err)
	} else if err = unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		err = fmt.Errorf("SO_RCVTIMEO: %w", err)
	} else if err = unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: ifindex}); err != nil {
		err = fmt.Errorf("bind: %w", err)
	}
	if err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// read records frames from fd until Stop, then closes fd. It owns fd, so
// that fd is never closed under a read (nor its number reused meanwhile).
func (cp *Capture) read(fd int) {
	defer close(cp.done)
	defer unix.Close(fd)
	buf := make([]byte, captureFrameMax)
	var drainEnd time.Time
	for {
		flags := unix.MSG_TRUNC // n is the frame's length, even if longer than buf
		if cp.stopping.Load() {
			if drainEnd.IsZero() {
				drainEnd = time.Now().Add(captureDrainMax)
			} else if time.Now().After(drainEnd) {
				cp.cutShort = true
				break
			}
			flags |= unix.MSG_DONTWAIT
		}
		n, _, err := unix.Recvfrom(fd, buf, flags)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if errors.Is(err, unix.EAGAIN) {
			// Nothing queued (at once, or within captureRecvTimeout).
			if cp.stopping.Load() {
				break
			}
			continue
		}
		if err != nil {
			cp.readErr = err
			break
		}
		cp.record(buf, n)
	}
	if st, err := unix.GetsockoptTpacketStats(fd, unix.SOL_PACKET, unix.PACKET_STATISTICS); err != nil {
		cp.readErr = errors.Join(cp.readErr, fmt.Errorf("PACKET_STATISTICS: %w", err))
	} else {
		cp.drops = st.Drops
	}
}

// record keeps a copy of the frame of length n read into buf.
func (cp *Capture) record(buf []byte, n int) {
	switch {
	case n > len(buf):
		cp.oversize++
		return
	case cp.bytes.Load()+int64(n) > cp.limit:
		cp.overflow++
		return
	}
	if len(cp.block)+n > cap(cp.block) {
		cp.block = make([]byte, 0, max(captureBlock, n))
	}
	start := len(cp.block)
	cp.block = append(cp.block, buf[:n]...)
	cp.recorded = append(cp.recorded, cp.block[start:len(cp.block):len(cp.block)])
	cp.frames.Add(1)
	cp.bytes.Add(int64(n))
}

// Stop ends the capture: the frames the kernel had queued for it are
// still read (and maybe some that come meanwhile), no more after it
// returns. It returns within about a second and may be called again.
func (cp *Capture) Stop() {
	cp.stopOnce.Do(func() {
		cp.stopping.Store(true)
		select {
		case <-cp.done:
		case <-time.After(captureStopWait):
			cp.stuck = true
			cp.t.Errorf("capture on %s: the reader did not end within %v of Stop", cp.host, captureStopWait)
		}
	})
}

// Frames is the number of frames recorded so far.
func (cp *Capture) Frames() int { return int(cp.frames.Load()) }

// Bytes is the length of the frames recorded so far, headers included.
func (cp *Capture) Bytes() int64 { return cp.bytes.Load() }

// Contains stops the capture and reports whether needle is in a recorded
// frame or in a TCP byte stream put back together from the recorded
// segments (so also when it was cut across segments). Where it would
// answer false but frames were lost (the capture's limit, an oversized
// frame, kernel drops, frames left unread, a read error), it fails the
// test instead: absence cannot be shown. Call it from the test's
// goroutine.
func (cp *Capture) Contains(needle []byte) bool {
	cp.t.Helper()
	cp.Stop()
	if cp.stuck {
		cp.t.Fatalf("capture on %s: cannot search, the reader did not end", cp.host)
		return false
	}
	if len(needle) == 0 {
		cp.t.Fatalf("capture on %s: Contains of an empty needle", cp.host)
		return false
	}
	for _, f := range cp.recorded {
		if bytes.Contains(f, needle) {
			return true
		}
	}
	cp.reassembly.Do(cp.reassemble)
	for _, s := range cp.streams {
		if containsChunks(s, needle) {
			return true
		}
	}
	if why := cp.incomplete(); why != "" {
		cp.t.Fatalf("capture on %s is incomplete (%s): cannot show that %q is absent", cp.host, why, abbrev(needle))
	}
	return false
}

// incomplete says which frames were lost, or "".
func (cp *Capture) incomplete() string {
	var why []string
	if cp.overflow > 0 {
		why = append(why, fmt.Sprintf("%d frames past the limit of %d MiB", cp.overflow, cp.limit>>20))
	}
	if cp.oversize > 0 {
		why = append(why, fmt.Sprintf("%d frames longer than %d KiB", cp.oversize, captureFrameMax>>10))
	}
	if cp.drops > 0 {
		why = append(why, fmt.Sprintf("%d frames dropped by the kernel", cp.drops))
	}
	if cp.cutShort {
		why = append(why, fmt.Sprintf("Stop stopped reading after %v, with frames still queued", captureDrainMax))
	}
	if cp.readErr != nil {
		why = append(why, "read: "+cp.readErr.Error())
	}
	if len(why) == 0 {
		return ""
	}
	return fmt.Sprint(why)
}

func abbrev(b []byte) string {
	if len(b) > 40 {
		return string(b[:40]) + "..."
	}
	return string(b)
}

// containsChunks reports whether needle is in the concatenation of
// chunks, copying no more than windows around the chunks' seams.
func containsChunks(chunks [][]byte, needle []byte) bool {
	k := len(needle) - 1
	var carry []byte // the last (up to) k bytes before the current chunk
	for _, ch := range chunks {
		if bytes.Contains(ch, needle) {
			return true
		}
		if len(carry) > 0 {
			// An occurrence across the seam starts in carry and ends
			// in ch's first k bytes.
			w := make([]byte, 0, len(carry)+min(k, len(ch)))
			w = append(append(w, carry...), ch[:min(k, len(ch))]...)
			if bytes.Contains(w, needle) {
				return true
			}
			if len(ch) < k {
				ch = w // w is carry+ch
			}
		}
		carry = ch[max(0, len(ch)-k):]
	}
	return false
}

// A flow is one direction of a TCP connection.
type flow struct{ src, dst netip.AddrPort }

type segment struct {
	off  int64 // from the stream's base
	data []byte
}

type tcpStream struct {
	base uint32 // sequence number of offset 0
	segs []segment
}

// reassemble puts the TCP payloads of the recorded frames back into byte
// streams, per flow: each segment at its sequence number (out of order,
// retransmitted or overlapping: the bytes first recorded stay), a SYN
// starting a new stream. A gap (a segment never seen) ends a piece; the
// next starts after it. Pieces are chunks of the frames, not copies.
func (cp *Capture) reassemble() {
	cur := map[flow]*tcpStream{}
	var all []*tcpStream
	for _, f := range cp.recorded {
		fl, seq, syn, payload, ok := parseTCP(f)
		if !ok {
			continue
		}
		s := cur[fl]
		if syn && (s == nil || s.base != seq+1) { // not a retransmitted SYN
			s = &tcpStream{base: seq + 1}
			cur[fl] = s
			all = append(all, s)
		}
		if syn {
			seq++ // data on a SYN follows it
		}
		if len(payload) == 0 {
			continue
		}
		if s == nil { // started before the capture
			s = &tcpStream{base: seq}
			cur[fl] = s
			all = append(all, s)
		}
		// Differences of sequence numbers wrap: within ±2 GiB of the
		// base, more than a capture holds.
		s.segs = append(s.segs, segment{off: int64(int32(seq - s.base)), data: payload})
	}
	for _, s := range all {
		sort.SliceStable(s.segs, func(i, j int) bool { return s.segs[i].off < s.segs[j].off })
		var piece [][]byte
		var end int64
		for _, g := range s.segs {
			gEnd := g.off + int64(len(g.data))
			switch {
			case piece == nil || g.off > end:
				if piece != nil {
					cp.streams = append(cp.streams, piece)
				}
				piece, end = [][]byte{g.data}, gEnd
			case gEnd > end:
				piece, end = append(piece, g.data[end-g.off:]), gEnd
			}
		}
		if piece != nil {
			cp.streams = append(cp.streams, piece)
		}
	}
}

// parseTCP reads an Ethernet frame holding a TCP segment over IPv4 (not
// a fragment) or IPv6 (no extension headers).
func parseTCP(f []byte) (fl flow, seq uint32, syn bool, payload []byte, ok bool) {
	if len(f) < 14 {
		return
	}
	ip := f[14:]
	var src, dst netip.Addr
	switch binary.BigEndian.Uint16(f[12:14]) {
	case 0x0800:
		if len(ip) < 20 || ip[0]>>4 != 4 || ip[9] != unix.IPPROTO_TCP {
			return
		}
		if binary.BigEndian.Uint16(ip[6:8])&0x3fff != 0 { // MF or an offset
			return
		}
		hl := int(ip[0]&0x0f) * 4
		// A GSO frame past 64 KiB (BIG TCP) has total length 0.
		if tl := int(binary.BigEndian.Uint16(ip[2:4])); tl != 0 {
			if tl > len(ip) {
				return
			}
			ip = ip[:tl] // no Ethernet padding
		}
		if hl < 20 || hl > len(ip) {
			return
		}
		src, dst = netip.AddrFrom4([4]byte(ip[12:16])), netip.AddrFrom4([4]byte(ip[16:20]))
		ip = ip[hl:]
	case 0x86dd:
		if len(ip) < 40 || ip[0]>>4 != 6 || ip[6] != unix.IPPROTO_TCP {
			return
		}
		if pl := int(binary.BigEndian.Uint16(ip[4:6])); pl != 0 {
			if 40+pl > len(ip) {
				return
			}
			ip = ip[:40+pl]
		}
		src, dst = netip.AddrFrom16([16]byte(ip[8:24])), netip.AddrFrom16([16]byte(ip[24:40]))
		ip = ip[40:]
	default:
		return
	}
	if len(ip) < 20 {
		return
	}
	off := int(ip[12]>>4) * 4
	if off < 20 || off > len(ip) {
		return
	}
	fl = flow{
		src: netip.AddrPortFrom(src, binary.BigEndian.Uint16(ip[0:2])),
		dst: netip.AddrPortFrom(dst, binary.BigEndian.Uint16(ip[2:4])),
	}
	return fl, binary.BigEndian.Uint32(ip[4:8]), ip[13]&0x02 != 0, ip[off:], true
}
