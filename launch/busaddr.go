package launch

import (
	"errors"
	"fmt"
	"net"
	"strconv"
)

// busAddress decides where the job's bus listens and what address workers
// dial. Remote hosts cannot reach a loopback address: that is refused at
// start with a clear error rather than discovered as a timeout later.
func busAddress(listen, advertise string, remote bool) (host string, port int, adv string, err error) {
	if listen == "" {
		listen = "127.0.0.1:0"
		if remote {
			listen = "0.0.0.0:0"
		}
	}
	h, p, err := net.SplitHostPort(listen)
	if err != nil {
		return "", 0, "", fmt.Errorf("bus listen address %q: %w", listen, err)
	}
	port, err = strconv.Atoi(p)
	if err != nil || port < 0 || port > 65535 {
		return "", 0, "", fmt.Errorf("bus listen address %q: bad port", listen)
	}
	if h == "" {
		h = "0.0.0.0"
	}
	if ip := net.ParseIP(h); ip == nil {
		return "", 0, "", fmt.Errorf("bus listen address %q: want an IP address", listen)
	} else if remote && ip.IsLoopback() {
		return "", 0, "", fmt.Errorf("bus listens on %s, a loopback address, but the hosts are remote: set [bus] listen to an address they can reach (or 0.0.0.0:0)", listen)
	}
	adv = advertise
	if adv == "" {
		if !remote {
			adv = "127.0.0.1"
		} else if ip := net.ParseIP(h); !ip.IsUnspecified() {
			adv = h
		} else if adv, err = firstExternalIPv4(); err != nil {
			return "", 0, "", err
		}
	}
	if ah, _, err := net.SplitHostPort(adv); err == nil {
		adv = ah // a port in advertise is the listen port's business
	}
	if remote {
		if ip := net.ParseIP(adv); ip != nil && ip.IsLoopback() || adv == "localhost" {
			return "", 0, "", fmt.Errorf("bus advertise address %s is a loopback address: workers on other hosts cannot reach it; set [bus] advertise to this host's address on their network", adv)
		}
	}
	return h, port, adv, nil
}

// firstExternalIPv4 is the first IPv4 address of an interface that is up
// and not loopback.
func firstExternalIPv4() (string, error) {
	ifaces, err := net.Interfaces()
	if err != nil {
		return "", fmt.Errorf("bus advertise address: list interfaces: %w", err)
	}
	for _, ifc := range ifaces {
		if ifc.Flags&net.FlagUp == 0 || ifc.Flags&net.FlagLoopback != 0 {
			continue
		}
		addrs, _ := ifc.Addrs()
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil && !ipn.IP.IsLoopback() {
				return ipn.IP.String(), nil
			}
		}
	}
	return "", errors.New("bus advertise address: this host has no non-loopback IPv4 address; set [bus] advertise")
}
