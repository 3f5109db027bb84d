package testcluster

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"strings"
	"testing"
)

// InOneFrame reports whether needle is within a single recorded frame:
// a test that finds it with Contains but not here has shown that
// reassembly across segments works. (For the tests only.)
func (cp *Capture) InOneFrame(needle []byte) bool {
	cp.Stop()
	for _, f := range cp.recorded {
		if strings.Contains(string(f), string(needle)) {
			return true
		}
	}
	return false
}

// fakeTB records a failure instead of ending the test.
type fakeTB struct {
	testing.TB
	failed string
}

func (f *fakeTB) Helper() {}
func (f *fakeTB) Fatalf(format string, args ...any) {
	f.failed = fmt.Sprintf(format, args...)
}
func (f *fakeTB) Errorf(format string, args ...any) { f.Fatalf(format, args...) }

var (
	addrA = netip.MustParseAddrPort("10.213.7.11:40000")
	addrB = netip.MustParseAddrPort("10.213.7.1:5000")
	addr6 = netip.MustParseAddrPort("[fe80::1]:40000")
)

const (
	flagSYN = 0x02
	flagACK = 0x10
)

// tcpFrame builds an Ethernet frame of a TCP segment from src to dst,
// padded with pad (as Ethernet pads short frames).
func tcpFrame(src, dst netip.AddrPort, seq uint32, flags byte, payload, pad string) []byte {
	tcp := make([]byte, 20, 20+len(payload))
	binary.BigEndian.PutUint16(tcp[0:], src.Port())
	binary.BigEndian.PutUint16(tcp[2:], dst.Port())
	binary.BigEndian.PutUint32(tcp[4:], seq)
	tcp[12] = 5 << 4
	tcp[13] = flags
	tcp = append(tcp, payload...)
	f := make([]byte, 14)
	if src.Addr().Is4() {
		binary.BigEndian.PutUint16(f[12:], 0x0800)
		ip := make([]byte, 20)
		ip[0] = 0x45
		binary.BigEndian.PutUint16(ip[2:], uint16(20+len(tcp)))
		ip[9] = 6
		s, d := src.Addr().As4(), dst.Addr().As4()
		copy(ip[12:], s[:])
		copy(ip[16:], d[:])
		f = append(f, ip...)
	} else {
		binary.BigEndian.PutUint16(f[12:], 0x86dd)
		ip := make([]byte, 40)
		ip[0] = 0x60
		binary.BigEndian.PutUint16(ip[4:], uint16(len(tcp)))
		ip[6] = 6
		s, d := src.Addr().As16(), dst.Addr().As16()
		copy(ip[8:], s[:])
		copy(ip[24:], d[:])
		f = append(f, ip...)
	}
	return append(append(f, tcp...), pad...)
}

// stopped returns a capture that recorded frames, as the reader would.
func stopped(t testing.TB, frames ...[]byte) *Capture {
	cp := newCapture(t, "hx")
	buf := make([]byte, captureFrameMax)
	for _, f := range frames {
		cp.record(buf, copy(buf, f))
	}
	close(cp.done)
	return cp
}

func TestCaptureReassembly(t *testing.T) {
	const base = 0xffffffff - 7 // the stream's sequence numbers wrap
	text := "0123456789-the-secret-token-abcdefghijklmnopqrstuvwxyz"
	seg := func(from, to int) []byte {
		return tcpFrame(addrA, addrB, uint32(base+1+from), flagACK, text[from:to], "")
	}
	cp := stopped(t,
		tcpFrame(addrA, addrB, base, flagSYN, "", ""),
		tcpFrame(addrB, addrA, 77, flagSYN|flagACK, "", ""),
		tcpFrame(addrA, addrB, base, flagSYN, "", ""), // retransmitted SYN
		seg(0, 12),
		seg(20, 30), // out of order
		seg(12, 16),
		seg(12, 22), // retransmitted, repacketized: overlaps both neighbours
		seg(30, 40),
		seg(20, 30), // duplicate
		// 40..44 never seen: a gap
		seg(44, len(text)),
		// the other direction, and another flow, with what would
		// complete a needle across flows
		tcpFrame(addrB, addrA, 78, flagACK, "REPLY-part-one|", ""),
		tcpFrame(addr6, netip.MustParseAddrPort("[fe80::2]:80"), 1000, flagACK, "-v6-", ""),
		tcpFrame(addr6, netip.MustParseAddrPort("[fe80::2]:80"), 1004, flagACK, "stream", ""),
	)
	for _, tc := range []struct {
		needle string
		want   bool
	}{
		{"-the-secret-token-", true}, // across four segments
		{text[:40], true},
		{"0123456789-the-secret-token-abcdefghijklmnopqrstu", false}, // across the gap
		{text[44:], true},
		{"-v6-stream", true},
		{"REPLY-part-one|-the", false},
		{"part-one", true}, // within one frame
		{"-the-secret-tokem-", false},
	} {
		if got := cp.Contains([]byte(tc.needle)); got != tc.want {
			t.Errorf("Contains(%q) = %v, want %v", tc.needle, got, tc.want)
		}
	}
	if cp.InOneFrame([]byte("-the-secret-token-")) {
		t.Error("the needle is in one frame: the test shows nothing about reassembly")
	}
}

// A new connection on the same ports (a SYN) starts a new stream, and
// Ethernet padding is no part of the stream.
func TestCaptureReassemblyNewConnAndPadding(t *testing.T) {
	cp := stopped(t,
		tcpFrame(addrA, addrB, 100, flagACK, "first-conn-", "PAD"),
		tcpFrame(addrA, addrB, 5000, flagSYN, "", ""),
		tcpFrame(addrA, addrB, 5001, flagACK, "second", ""),
		tcpFrame(addrA, addrB, 5007, flagACK, "-conn", ""),
		// the first connection's next segment, after the second's SYN
		tcpFrame(addrA, addrB, 111, flagACK, "tail", ""),
	)
	for _, tc := range []struct {
		needle string
		want   bool
	}{
		{"second-conn", true},
		{"first-conn-PAD", true}, // in the raw frame
		{"conn-PADtail", false},
		{"first-conn-tail", false}, // the stream it was in ended at the SYN
	} {
		if got := cp.Contains([]byte(tc.needle)); got != tc.want {
			t.Errorf("Contains(%q) = %v, want %v", tc.needle, got, tc.want)
		}
	}
}

func TestContainsChunks(t *testing.T) {
	chunks := [][]byte{[]byte("ab"), []byte("c"), []byte("d"), []byte("efgh"), []byte("i")}
	all := "abcdefghi"
	for i := 0; i < len(all); i++ {
		for j := i + 1; j <= len(all); j++ {
			if !containsChunks(chunks, []byte(all[i:j])) {
				t.Errorf("containsChunks(%q) = false", all[i:j])
			}
		}
	}
	for _, n := range []string{"ac", "abcdefghij", "x", "hia"} {
		if containsChunks(chunks, []byte(n)) {
			t.Errorf("containsChunks(%q) = true", n)
		}
	}
}

// Lost frames make an absent needle a failure, not an answer; a needle
// that was recorded is still found.
func TestCaptureIncomplete(t *testing.T) {
	frame := tcpFrame(addrA, addrB, 1, flagACK, "recorded", "")
	for _, tc := range []struct {
		name string
		lose func(cp *Capture)
		want string
	}{
		{"limit", func(cp *Capture) {
			cp.limit = int64(len(frame))
			buf := make([]byte, captureFrameMax)
			cp.record(buf, copy(buf, frame)) // past the limit
		}, "1 frames past the limit"},
		{"oversize", func(cp *Capture) {
			cp.record(make([]byte, captureFrameMax), captureFrameMax+1)
		}, "1 frames longer than 256 KiB"},
		{"drops", func(cp *Capture) { cp.drops = 3 }, "3 frames dropped by the kernel"},
		{"cut short", func(cp *Capture) { cp.cutShort = true }, "with frames still queued"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ft := &fakeTB{}
			cp := newCapture(ft, "hx")
			cp.limit = 1 << 20
			buf := make([]byte, captureFrameMax)
			cp.record(buf, copy(buf, frame))
			tc.lose(cp)
			close(cp.done)
			if !cp.Contains([]byte("recorded")) || ft.failed != "" {
				t.Errorf("Contains(recorded): failed %q", ft.failed)
			}
			if cp.Contains([]byte("absent")) {
				t.Error("Contains(absent) = true")
			}
			if !strings.Contains(ft.failed, "incomplete") || !strings.Contains(ft.failed, tc.want) {
				t.Errorf("Contains(absent) failed with %q, want a failure saying %q", ft.failed, tc.want)
			}
			if cp.Frames() != 1 || cp.Bytes() != int64(len(frame)) {
				t.Errorf("Frames, Bytes = %d, %d; want 1, %d", cp.Frames(), cp.Bytes(), len(frame))
			}
		})
	}
}
