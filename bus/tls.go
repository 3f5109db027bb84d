package bus

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
)

// TLS on the bus. Every TLS link is TLS 1.3. A server (ServerTLS) shows
// its certificate to every client, leaf and route; with a PeerCA it also
// asks leaves and routes for a certificate that CA signed (mutual TLS),
// so that a server holding the token but not the job's certificate
// cannot join the hub. Clients, which present the token alone, are
// asked for none. A client or leaf (ClientTLS) checks the server's
// certificate against its CA and name, and shows its own when it has
// one.

// ServerTLS is a server's TLS.
type ServerTLS struct {
	// Cert is the server's certificate, with its key.
	Cert tls.Certificate
	// PeerCA (PEM), when set, is the CA whose certificates leaves and
	// routes must present; routes also check each other's server
	// certificates against it.
	PeerCA []byte
	// PeerName is the name the other servers' certificates must carry,
	// whatever address a route dials; empty: that address.
	PeerName string
}

// ClientTLS is what a client or a leaf trusts of a server's certificate,
// and what it shows of its own. The zero value is no TLS.
type ClientTLS struct {
	// CA (PEM) holds the CAs the server's certificate must chain to;
	// empty: the system's.
	CA []byte
	// Name is the name the server's certificate must carry; empty: the
	// host of the URL dialed.
	Name string
	// Cert, when set, is shown to a server that asks for one (a hub's
	// leaf port under mutual TLS).
	Cert *tls.Certificate
}

// On says whether TLS is wanted: a CA or a name was given.
func (c ClientTLS) On() bool { return len(c.CA) > 0 || c.Name != "" }

// Config is c as a TLS client's configuration; nil when c is off.
func (c ClientTLS) Config() (*tls.Config, error) {
	if !c.On() {
		return nil, nil
	}
	cfg := &tls.Config{ServerName: c.Name, MinVersion: tls.VersionTLS13}
	if len(c.CA) > 0 {
		pool, err := certPool(c.CA)
		if err != nil {
			return nil, err
		}
		cfg.RootCAs = pool
	}
	if c.Cert != nil {
		cfg.Certificates = []tls.Certificate{*c.Cert}
	}
	return cfg, nil
}

// certPool is the CAs of pemData.
func certPool(pemData []byte) (*x509.CertPool, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pemData) {
		return nil, errors.New("TLS CA: no PEM certificate in it")
	}
	return pool, nil
}

// Config is the TLS configuration a server shows its clients: its
// certificate, TLS 1.3.
func (s *ServerTLS) Config() *tls.Config {
	return &tls.Config{Certificates: []tls.Certificate{s.Cert}, MinVersion: tls.VersionTLS13}
}

// configs are the TLS configurations of a server's client port, leaf
// port and routes.
func (s *ServerTLS) configs() (clients, leaves, routes *tls.Config, err error) {
	clients = s.Config()
	if len(s.PeerCA) == 0 {
		return clients, clients, clients, nil
	}
	pool, err := certPool(s.PeerCA)
	if err != nil {
		return nil, nil, nil, err
	}
	leaves = clients.Clone()
	leaves.ClientCAs, leaves.ClientAuth = pool, tls.RequireAndVerifyClientCert
	routes = leaves.Clone()
	routes.RootCAs = pool // a route dials as well as it accepts
	routes.ServerName = s.PeerName
	return clients, leaves, routes, nil
}
