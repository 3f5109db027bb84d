package launch

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"maps"
	"net"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/monarch-go/monarch/bus"
	"github.com/monarch-go/monarch/hostsconfig"
	"github.com/monarch-go/monarch/internal/jobca"
	"github.com/monarch-go/monarch/internal/jobenv"
)

// jobBus is a job's bus as its launcher runs it, and how each side dials
// it: the hosts at advURL, this machine at localURL. It is the job's hub:
// every host's leaf links to it, at leafAdv (leafLocal from this machine);
// with hubs > 1, the first of that many servers joined by routes (the
// others run on the first hosts, see hostagent.StartHostBus), which
// they join at route.
type jobBus struct {
	srv                *bus.Server
	advURL, localURL   string
	leafAdv, leafLocal string
	hubs               int
	route              string
	direct             bool // no leaf nodes: every process dials the hub
	// With TLS: the CA certificates (PEM) and the name the bus's
	// certificate is checked against; ca is the job's own CA when the
	// user brought no certificate, which certifies the hosts' agents.
	tlsCA, tlsName string
	ca             *jobca.CA
	serverTLS      *bus.ServerTLS // the hub's: the link watcher shows its certificate too
	// listenHost is the address it listens on, advHost the one hosts
	// dial: where the job's other listeners go too.
	listenHost, advHost string
}

// startJobBus starts job's bus where the hosts of p can reach it (see
// busAddress), advertising, unless c says what, this machine's address on
// the route to the hosts; with TLS as c and p say (see busTLS).
func startJobBus(ctx context.Context, c hostsconfig.Bus, p *placement, job string) (*jobBus, error) {
	if p.remote && c.Advertise == "" && p.route != nil {
		if a, err := bus.LocalAddrTo(p.route(ctx)); err == nil && !net.ParseIP(a).IsLoopback() {
			c.Advertise = a
		}
	}
	listenHost, port, adv, err := busAddress(c.Listen, c.Advertise, p.remote)
	if err != nil {
		return nil, err
	}
	serverTLS, clientTLS, ca, err := busTLS(c, p, job, adv)
	if err != nil {
		return nil, err
	}
	o := bus.ServerOptions{Host: listenHost, Port: port, TLS: serverTLS, Leaves: &bus.Listen{Advertise: adv}}
	if c.Hubs > 1 {
		if p.hosts != nil && c.Hubs > len(p.hosts) {
			return nil, fmt.Errorf("[bus] hubs = %d, but the job has %d hosts: at most one hub server a host", c.Hubs, len(p.hosts))
		}
		o.Cluster = &bus.Cluster{Listen: bus.Listen{Advertise: adv}}
	}
	srv, err := bus.StartServer(o)
	if err != nil {
		return nil, err
	}
	advHost := adv
	if h, _, err := net.SplitHostPort(adv); err == nil {
		advHost = h
	}
	jb := &jobBus{listenHost: listenHost, advHost: advHost, srv: srv, advURL: "nats://" + net.JoinHostPort(adv, strconv.Itoa(srv.Port())), leafAdv: srv.LeafURL()}
	jb.localURL = "nats://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(srv.Port()))
	if u, err := url.Parse(jb.leafAdv); err == nil {
		jb.leafLocal = "nats-leaf://" + net.JoinHostPort("127.0.0.1", u.Port())
	}
	if ip := net.ParseIP(listenHost); ip != nil && !ip.IsUnspecified() && !ip.IsLoopback() {
		// Listening on one interface only: dial it.
		jb.localURL, jb.leafLocal = jb.advURL, jb.leafAdv
	}
	if c.Hubs > 1 {
		jb.hubs, jb.route = c.Hubs, srv.RouteURL()
	}
	jb.tlsCA, jb.tlsName, jb.ca, jb.serverTLS = string(clientTLS.CA), clientTLS.Name, ca, serverTLS
	jb.direct = c.Direct
	return jb, nil
}

// caValidity is how long a job's CA and its certificates are valid: the
// longest a launcher may run; a requeued job's next run makes a new CA.
const caValidity = 366 * 24 * time.Hour

// busTLS is the TLS of a job's bus: the hub's, and what its processes
// trust. With the user's certificate files, theirs; else, with TLS on
// (tls = true, or left out for hosts not all this machine), a CA made for
// the job, which certifies the hub as jobca.HubName and later the hosts'
// agents; else none.
func busTLS(c hostsconfig.Bus, p *placement, job, adv string) (*bus.ServerTLS, bus.ClientTLS, *jobca.CA, error) {
	switch {
	case c.TLSCert != "":
		cert, err := tls.LoadX509KeyPair(c.TLSCert, c.TLSKey)
		if err != nil {
			return nil, bus.ClientTLS{}, nil, fmt.Errorf("[bus] TLS certificate %s, key %s: %w", c.TLSCert, c.TLSKey, err)
		}
		name := adv
		if h, _, err := net.SplitHostPort(adv); err == nil {
			name = h
		}
		client := bus.ClientTLS{Name: name}
		if c.TLSCA != "" {
			if client.CA, err = os.ReadFile(c.TLSCA); err != nil {
				return nil, bus.ClientTLS{}, nil, fmt.Errorf("[bus] TLS CA: %w", err)
			}
		}
		return &bus.ServerTLS{Cert: cert}, client, nil, nil
	case c.TLS == hostsconfig.TLSOn || c.TLS == hostsconfig.TLSAuto && p.remote:
		ca, err := jobca.New(job, caValidity)
		if err != nil {
			return nil, bus.ClientTLS{}, nil, err
		}
		cert, err := ca.IssueTLS("hub", []string{jobca.HubName})
		if err != nil {
			return nil, bus.ClientTLS{}, nil, err
		}
		return &bus.ServerTLS{Cert: cert, PeerCA: ca.CertPEM(), PeerName: jobca.HubName}, bus.ClientTLS{CA: ca.CertPEM(), Name: jobca.HubName}, ca, nil
	}
	return nil, bus.ClientTLS{}, nil, nil
}

// dial is how a process dials the bus at url, secret included, and
// where a host's leaf links (leaf; none when direct).
func (jb *jobBus) dial(url, leaf string) jobenv.Bus {
	if jb.direct {
		leaf = ""
	}
	return jobenv.Bus{URL: url, Token: jb.srv.Token(), TLSCA: jb.tlsCA, TLSName: jb.tlsName,
		Leaf: leaf, Hubs: jb.hubs, Route: jb.route}
}

// MetricsVar, set in the launcher's environment, makes it print, as the
// job ends, what its hub server held at its peak, as the scale benchmark
// reads them: "METRIC hub-subs N" (every subscription it held, its
// leaves' included), "METRIC hub-leaf-subs N" (those its leaves
// announced) and "METRIC leaves-learned N" (the subscriptions it told
// its leaves of, in all: bus.Interest.Told), and "METRIC hub-proc-subs
// N": the job's proc subjects it held at any sample, each counted once
// (a peak count at one sample could miss a subject that came just after
// another went, or the short moment all were there), and "METRIC
// hub-proc-subjects S,..." those subjects.
const MetricsVar = "MONARCH_METRICS"

// watchInterest samples the hub server's subscriptions every 50 ms, and
// whenever sampleNow is called, until stop is called, which prints the
// peak to w. The launcher calls sampleNow as it hears of each host that
// comes up: a host's subjects are at the hub before its first
// heartbeat leaves it (they travel on the same link, in order), so every
// host's are seen, however short its run and however starved the
// ticker.
func (jb *jobBus) watchInterest(w io.Writer, job string) (sampleNow, stop func()) {
	done, end := make(chan struct{}), make(chan struct{})
	var mu sync.Mutex
	var peak, leafSubs, learned int
	procs := map[string]bool{}
	procPrefix := jobenv.SubjectsOf(job).Proc("")
	sample := func() {
		mu.Lock()
		defer mu.Unlock()
		in := jb.srv.Interest(procPrefix)
		if in.Subs > peak {
			peak, leafSubs, learned = in.Subs, in.OverLeaves, in.Told
		}
		for _, subj := range in.UnderSubjects {
			procs[subj] = true
		}
	}
	go func() {
		defer close(done)
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for {
			sample()
			select {
			case <-t.C:
			case <-end:
				return
			}
		}
	}()
	return sample, func() {
		close(end)
		<-done
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(w, "METRIC hub-subs %d\nMETRIC hub-leaf-subs %d\nMETRIC leaves-learned %d\nMETRIC hub-proc-subs %d\n", peak, leafSubs, learned, len(procs))
		fmt.Fprintf(w, "METRIC hub-proc-subjects %s\n", strings.Join(slices.Sorted(maps.Keys(procs)), ","))
	}
}
