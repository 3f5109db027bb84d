package door

import (
	"net"
	"net/netip"
)

// loopback is the one source of every loopback address: any user of a
// host may dial from any of 127.0.0.0/8, or ::1.
var loopback = netip.PrefixFrom(netip.IPv6Loopback(), 128)

// SourceOf is the source a peer's address counts against: its IPv4
// address, its IPv6 /64 (what one host holds), or loopback; the zero
// Prefix for an address that is not TCP's.
func SourceOf(a net.Addr) netip.Prefix {
	ta, ok := a.(*net.TCPAddr)
	if !ok {
		return netip.Prefix{}
	}
	ip := ta.AddrPort().Addr().Unmap().WithZone("")
	switch {
	case ip.IsLoopback():
		return loopback
	case ip.Is4():
		return netip.PrefixFrom(ip, 32)
	}
	p, _ := ip.Prefix(64)
	return p
}
