package hostsconfig

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"time"
)

// TLSMode is [bus] tls: whether a job's bus runs TLS.
type TLSMode int

const (
	// TLSAuto (tls left out): TLS when the job's hosts are not all this
	// machine, with a CA the launcher makes for the job, or the files
	// tls_cert, tls_key and tls_ca when given.
	TLSAuto TLSMode = iota
	// TLSOn (tls = true): TLS even for a job on this machine alone.
	TLSOn
	// TLSOff (tls = false): no TLS, even across hosts. Unsafe off-host:
	// the token and every message cross the network in the clear.
	TLSOff
)

// checkTLSFiles reads the user's certificate, key and CA, once they are
// known to exist, and refuses what would fail at the job's start: a file
// that does not parse, a key that is not the certificate's, a
// certificate out of its validity, one the CA did not sign.
func (t *table) checkTLSFiles(b *Bus) {
	if b.TLSCert == "" || b.TLSKey == "" {
		return
	}
	certPEM, err := os.ReadFile(b.TLSCert)
	if err != nil {
		t.fail("tls_cert", "%v", err)
		return
	}
	chain, err := certs(certPEM)
	if err != nil {
		t.fail("tls_cert", "%s: %v", b.TLSCert, err)
		return
	}
	leaf := chain[0]
	keyPEM, err := os.ReadFile(b.TLSKey)
	if err != nil {
		t.fail("tls_key", "%v", err)
		return
	}
	if _, err := tls.X509KeyPair(certPEM, keyPEM); err != nil {
		t.fail("tls_key", "%s is not the key of %s: %v", b.TLSKey, b.TLSCert, err)
		return
	}
	now := time.Now()
	switch {
	case now.After(leaf.NotAfter):
		t.fail("tls_cert", "%s expired on %s", b.TLSCert, leaf.NotAfter.UTC().Format(time.RFC3339))
		return
	case now.Before(leaf.NotBefore):
		t.fail("tls_cert", "%s is not valid before %s", b.TLSCert, leaf.NotBefore.UTC().Format(time.RFC3339))
		return
	}
	if b.TLSCA == "" {
		return
	}
	caPEM, err := os.ReadFile(b.TLSCA)
	if err != nil {
		t.fail("tls_ca", "%v", err)
		return
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		t.fail("tls_ca", "%s holds no PEM certificate", b.TLSCA)
		return
	}
	inter := x509.NewCertPool()
	for _, c := range chain[1:] {
		inter.AddCert(c)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
		t.fail("tls_ca", "%s did not sign %s: %v", b.TLSCA, b.TLSCert, err)
	}
}

// certs are the certificates of pemData, in order: the server's own,
// then the chain up to the CA if the file carries it.
func certs(pemData []byte) ([]*x509.Certificate, error) {
	var out []*x509.Certificate
	for {
		var block *pem.Block
		if block, pemData = pem.Decode(pemData); block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("certificate %d does not parse: %w", len(out)+1, err)
		}
		out = append(out, c)
	}
	if len(out) == 0 {
		return nil, errors.New("no PEM certificate in it")
	}
	return out, nil
}
