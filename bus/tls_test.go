package bus_test

import (
	"context"
	"crypto/tls"
	"testing"
	"time"

	"github.com/monarch-go/monarch/bus"
	"github.com/monarch-go/monarch/internal/jobca"
)

// testCA is a job's CA, and a certificate of it for name, valid for
// 127.0.0.1 and "bus.test".
func testCA(t *testing.T, name string) (*jobca.CA, tls.Certificate) {
	t.Helper()
	ca, err := jobca.New("j-"+name, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return ca, issue(t, ca, name)
}

func issue(t *testing.T, ca *jobca.CA, name string) tls.Certificate {
	t.Helper()
	cert, err := ca.IssueTLS(name, []string{"127.0.0.1", "bus.test"})
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

func TestTLS(t *testing.T) {
	ca, cert := testCA(t, "hub")
	s := startServer(t, bus.ServerOptions{TLS: &bus.ServerTLS{Cert: cert, PeerCA: ca.CertPEM()}})
	// With the CA: works, and messages flow; clients show no certificate.
	c, err := bus.Connect(s.URL(), bus.ConnOptions{Token: s.Token(), TLS: bus.ClientTLS{CA: ca.CertPEM(), Name: "bus.test"}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Subscribe("x"); err != nil {
		t.Fatal(err)
	}
	got := collect(t, c, 1)
	c.Publish("x", []byte("over tls"))
	if m := recv(t, got); string(m.Data) != "over tls" {
		t.Fatalf("got %q", m.Data)
	}
	other, _ := testCA(t, "other")
	for _, tt := range []struct {
		what string
		tls  bus.ClientTLS
	}{
		{"plain", bus.ClientTLS{}},
		{"verifying another name", bus.ClientTLS{CA: ca.CertPEM(), Name: "other.test"}},
		{"trusting another job's CA", bus.ClientTLS{CA: other.CertPEM(), Name: "bus.test"}},
		{"trusting the system's CAs", bus.ClientTLS{Name: "bus.test"}},
	} {
		if c, err := bus.Connect(s.URL(), bus.ConnOptions{Token: s.Token(), TLS: tt.tls}); err == nil {
			c.Close()
			t.Errorf("a connection %s, with the right token, succeeded", tt.what)
		}
	}
	// In-process connections (the launcher's own) need no TLS.
	ic, err := bus.ConnectInProcess(s, bus.ConnOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ic.Flush(context.Background())
	ic.Close()
}

// TestLeafTLS: a hub with a peer CA takes a leaf over TLS that shows a
// certificate of that CA, and no other, whatever its token.
func TestLeafTLS(t *testing.T) {
	ca, cert := testCA(t, "hub")
	hub := startHub(t, bus.ServerOptions{TLS: &bus.ServerTLS{Cert: cert, PeerCA: ca.CertPEM()}})
	leafCert := issue(t, ca, "leaf")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	leaf, err := bus.StartLeaf(ctx, bus.Hub{URLs: []string{hub.LeafURL()}, Token: hub.Token(),
		TLS: bus.ClientTLS{CA: ca.CertPEM(), Name: "bus.test", Cert: &leafCert}}, bus.ServerOptions{Token: hub.Token()})
	if err != nil {
		t.Fatal(err)
	}
	defer leaf.Shutdown()
	// The leaf's own clients, on loopback, need no TLS.
	c := dial(t, leaf, bus.ConnOptions{})
	c.Flush(context.Background())

	other, otherCert := testCA(t, "other")
	for _, tt := range []struct {
		what string
		tls  bus.ClientTLS
	}{
		{"without TLS", bus.ClientTLS{}},
		{"showing no certificate", bus.ClientTLS{CA: ca.CertPEM(), Name: "bus.test"}},
		{"showing another job's certificate", bus.ClientTLS{CA: ca.CertPEM(), Name: "bus.test", Cert: &otherCert}},
		{"trusting another job's CA", bus.ClientTLS{CA: other.CertPEM(), Name: "bus.test", Cert: &leafCert}},
	} {
		short, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
		l, err := bus.StartLeaf(short, bus.Hub{URLs: []string{hub.LeafURL()}, Token: hub.Token(), TLS: tt.tls}, bus.ServerOptions{})
		cancel()
		if err == nil {
			l.Shutdown()
			t.Errorf("a leaf %s, with the right token, linked to the hub", tt.what)
		}
	}
}

// TestRoutesTLS: the servers of a hub route to each other over mutual TLS
// with their job's certificates, and a server with another job's
// certificate cannot join, token or not.
func TestRoutesTLS(t *testing.T) {
	ca, cert := testCA(t, "hub0")
	token := bus.NewToken()
	serve := func(cert tls.Certificate, peer []byte, routes ...string) *bus.Server {
		return startServer(t, bus.ServerOptions{Token: token, TLS: &bus.ServerTLS{Cert: cert, PeerCA: peer, PeerName: "bus.test"},
			Leaves: &bus.Listen{}, Cluster: &bus.Cluster{Routes: routes}})
	}
	first := serve(cert, ca.CertPEM())
	second := serve(issue(t, ca, "hub1"), ca.CertPEM(), first.RouteURL())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, s := range []*bus.Server{first, second} {
		if err := s.AwaitRoutes(ctx, 1); err != nil {
			t.Fatal(err)
		}
	}
	clientTLS := bus.ClientTLS{CA: ca.CertPEM(), Name: "bus.test"}
	sub, err := bus.Connect(second.URL(), bus.ConnOptions{Token: token, TLS: clientTLS, HubServers: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	if _, err := sub.Subscribe("x"); err != nil {
		t.Fatal(err)
	}
	got := collect(t, sub, 100) // room for the repeats below
	pub, err := bus.Connect(first.URL(), bus.ConnOptions{Token: token, TLS: clientTLS})
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	// The subscription reaches the first server over the route a moment
	// after the second has it: publish until it is there (bounded).
	var m bus.Message
	for deadline := time.Now().Add(10 * time.Second); ; {
		pub.Publish("x", []byte("routed"))
		select {
		case m = <-got:
		case <-time.After(100 * time.Millisecond):
			if time.Now().After(deadline) {
				t.Fatal("no routed message within 10s")
			}
			continue
		}
		break
	}
	if string(m.Data) != "routed" {
		t.Fatalf("got %q", m.Data)
	}

	other, otherCert := testCA(t, "intruder")
	intruder := serve(otherCert, other.CertPEM(), first.RouteURL())
	short, cancel2 := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel2()
	if err := intruder.AwaitRoutes(short, 1); err == nil {
		t.Fatal("a server with another job's certificate routed to the hub")
	}
}

func TestTLSBadCA(t *testing.T) {
	_, cert := testCA(t, "hub")
	if s, err := bus.StartServer(bus.ServerOptions{TLS: &bus.ServerTLS{Cert: cert, PeerCA: []byte("not PEM")}}); err == nil {
		s.Shutdown()
		t.Fatal("a server with a peer CA that holds no certificate started")
	}
	if c, err := bus.Connect("nats://127.0.0.1:1", bus.ConnOptions{Token: "t", TLS: bus.ClientTLS{CA: []byte("not PEM")}}); err == nil {
		c.Close()
		t.Fatal("a connection with a CA that holds no certificate was made")
	}
}
