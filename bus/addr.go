package bus

import "net"

// LocalAddrTo returns this machine's IPv4 address on the route to host (a
// name or an address): the address that machines on that side can dial
// back. No packet is sent: connecting a UDP socket only picks the route.
func LocalAddrTo(host string) (string, error) {
	addr, err := net.ResolveIPAddr("ip4", host)
	if err != nil {
		return "", err
	}
	c, err := net.DialUDP("udp4", nil, &net.UDPAddr{IP: addr.IP, Port: 9})
	if err != nil {
		return "", err
	}
	defer c.Close()
	return c.LocalAddr().(*net.UDPAddr).IP.String(), nil
}
