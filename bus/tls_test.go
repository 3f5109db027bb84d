package bus_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/monarch-go/monarch/bus"
)

// selfSigned writes a self-signed certificate for 127.0.0.1 and "bus.test"
// and its key, and returns their paths (the certificate is its own CA).
func selfSigned(t *testing.T) (cert, key string) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "bus.test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		DNSNames: []string{"bus.test"}, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		IsCA: true, BasicConstraintsValid: true,
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	kd, _ := x509.MarshalECPrivateKey(k)
	dir := t.TempDir()
	cert, key = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	os.WriteFile(cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
	os.WriteFile(key, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kd}), 0o600)
	return cert, key
}

func TestTLS(t *testing.T) {
	cert, key := selfSigned(t)
	s := startServer(t, bus.ServerOptions{TLSCert: cert, TLSKey: key})
	// With the CA: works, and messages flow.
	c, err := bus.Connect(s.URL(), bus.ConnOptions{Token: s.Token(), TLSCA: cert, TLSName: "bus.test"})
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
	// Without TLS, or trusting the wrong name, the server refuses.
	if c, err := bus.Connect(s.URL(), bus.ConnOptions{Token: s.Token()}); err == nil {
		c.Close()
		t.Fatal("a plain connection to a TLS bus succeeded")
	}
	if c, err := bus.Connect(s.URL(), bus.ConnOptions{Token: s.Token(), TLSCA: cert, TLSName: "other.test"}); err == nil {
		c.Close()
		t.Fatal("a connection verifying another name succeeded")
	}
	// In-process connections (the launcher's own) need no TLS.
	ic, err := bus.ConnectInProcess(s, bus.ConnOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ic.Flush(context.Background())
	ic.Close()
}

func TestTLSBadFiles(t *testing.T) {
	if s, err := bus.StartServer(bus.ServerOptions{TLSCert: "/nonexistent.pem", TLSKey: "/nonexistent.key"}); err == nil {
		s.Shutdown()
		t.Fatal("a server with missing TLS files started")
	}
}
