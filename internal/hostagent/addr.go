package hostagent

import (
	"net"
	"net/url"
	"os"
)

// routeAddr is this host's address on the route to the hub at hubURL:
// the source address the kernel picks to reach it (a UDP "connection"
// sends nothing). Where that cannot be told, the host's name.
func routeAddr(hubURL string) string {
	if u, err := url.Parse(hubURL); err == nil && u.Host != "" {
		if c, err := net.Dial("udp", u.Host); err == nil {
			defer c.Close()
			return c.LocalAddr().(*net.UDPAddr).IP.String()
		}
	}
	name, _ := os.Hostname()
	return name
}
