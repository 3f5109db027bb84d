package jobca

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"time"
)

// CA is a job's certificate authority.
type CA struct {
	job  string
	key  *ecdsa.PrivateKey
	cert *x509.Certificate
	der  []byte
}

// HubName is the name a job's CA certifies every server of the job's hub
// for, and the name its clients check: one name whatever address a
// server is dialed at (an IP, a host name, loopback), under a top-level
// domain that never resolves. Only the job's own CA vouches for it.
const HubName = "hub.monarch.invalid"

// skew is how far before now certificates start: a host whose clock is
// a little behind the launcher's must not find them not yet valid.
const skew = time.Hour

// New makes the CA of job, valid for validity (its certificates are too).
func New(job string, validity time.Duration) (*CA, error) {
	if job == "" || validity <= 0 {
		return nil, errors.New("jobca: a CA needs a job and a validity")
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("jobca: %w", err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "monarch job " + job + " CA"},
		NotBefore:             now.Add(-skew),
		NotAfter:              now.Add(validity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("jobca: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("jobca: %w", err)
	}
	return &CA{job: job, key: key, cert: cert, der: der}, nil
}

// CertPEM is the CA's certificate, PEM-encoded: what every process of
// the job trusts.
func (ca *CA) CertPEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.der})
}

// Pool is a pool that holds the CA's certificate alone.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.cert)
	return p
}

// Issue makes a key and a certificate for name, valid for the host names
// and addresses in hosts (as a server) and as a client, until the CA
// itself expires. It returns both PEM-encoded.
func (ca *CA) Issue(name string, hosts []string) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("jobca: %w", err)
	}
	if certPEM, err = ca.Sign(name, &key.PublicKey, hosts); err != nil {
		return nil, nil, err
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, fmt.Errorf("jobca: %w", err)
	}
	return certPEM, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), nil
}

// IssueTLS is Issue, as a certificate with its key for crypto/tls.
func (ca *CA) IssueTLS(name string, hosts []string) (tls.Certificate, error) {
	certPEM, keyPEM, err := ca.Issue(name, hosts)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.X509KeyPair(certPEM, keyPEM)
}

// Sign certifies pub, a key made elsewhere (a host agent's), for name and
// hosts as Issue does, and returns the certificate PEM-encoded. Only
// ECDSA P-256 and Ed25519 keys are taken.
func (ca *CA) Sign(name string, pub crypto.PublicKey, hosts []string) ([]byte, error) {
	switch k := pub.(type) {
	case *ecdsa.PublicKey:
		if k.Curve != elliptic.P256() {
			return nil, errors.New("jobca: an ECDSA key must be on P-256")
		}
	case ed25519.PublicKey:
	default:
		return nil, fmt.Errorf("jobca: a %T key is not taken (ECDSA P-256 or Ed25519)", pub)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: name, OrganizationalUnit: []string{"monarch job " + ca.job}},
		NotBefore:    ca.cert.NotBefore,
		NotAfter:     ca.cert.NotAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else if h != "" {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, pub, ca.key)
	if err != nil {
		return nil, fmt.Errorf("jobca: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), nil
}

// serial is a random 128-bit serial number, as RFC 5280 allows.
func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	return n.Add(n, big.NewInt(1))
}
