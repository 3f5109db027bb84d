package launch

import (
	"context"
	"net"
	"strconv"

	"github.com/monarch-go/monarch/bus"
	"github.com/monarch-go/monarch/hostsconfig"
	"github.com/monarch-go/monarch/internal/jobenv"
)

// jobBus is a job's bus as its launcher runs it, and how each side dials
// it: the hosts at advURL, this machine at localURL.
type jobBus struct {
	srv      *bus.Server
	advURL   string
	localURL string
	// With TLS: the CA file and the name the bus's certificate is
	// checked against (the advertised address).
	tlsCA, tlsName string
}

// startJobBus starts the bus where the hosts of p can reach it (see
// busAddress), advertising, unless c says what, this machine's address on
// the route to the hosts.
func startJobBus(ctx context.Context, c hostsconfig.Bus, p *placement) (*jobBus, error) {
	if p.remote && c.Advertise == "" && p.route != nil {
		if a, err := routeTo(p.route(ctx)); err == nil && !net.ParseIP(a).IsLoopback() {
			c.Advertise = a
		}
	}
	listenHost, port, adv, err := busAddress(c.Listen, c.Advertise, p.remote)
	if err != nil {
		return nil, err
	}
	srv, err := bus.StartServer(bus.ServerOptions{Host: listenHost, Port: port, TLSCert: c.TLSCert, TLSKey: c.TLSKey})
	if err != nil {
		return nil, err
	}
	jb := &jobBus{srv: srv, advURL: "nats://" + net.JoinHostPort(adv, strconv.Itoa(srv.Port()))}
	jb.localURL = "nats://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(srv.Port()))
	if ip := net.ParseIP(listenHost); ip != nil && !ip.IsUnspecified() && !ip.IsLoopback() {
		jb.localURL = jb.advURL // listening on one interface only: dial it
	}
	if c.TLSCert != "" {
		jb.tlsCA, jb.tlsName = c.TLSCA, adv
	}
	return jb, nil
}

// dial is how a process dials the bus at url, secret included.
func (jb *jobBus) dial(url string) jobenv.Bus {
	return jobenv.Bus{URL: url, Token: jb.srv.Token(), TLSCA: jb.tlsCA, TLSName: jb.tlsName}
}
