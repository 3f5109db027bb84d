package jobca

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"io"
	"testing"
	"time"
)

// A certificate the job's CA issued verifies against it, for the names it
// was issued for; one of another job's CA does not.
func TestIssueVerifies(t *testing.T) {
	ca, err := New("j1", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	other, err := New("j2", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	certPEM, _, err := ca.Issue("hub", []string{"10.0.0.1", "head.cluster"})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := pem.Decode(certPEM)
	cert, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"10.0.0.1", "head.cluster"} {
		if _, err := cert.Verify(x509.VerifyOptions{Roots: ca.Pool(), DNSName: name, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
			t.Errorf("as %s: %v", name, err)
		}
	}
	if _, err := cert.Verify(x509.VerifyOptions{Roots: ca.Pool(), DNSName: "10.0.0.2"}); err == nil {
		t.Error("verified for an address it was not issued for")
	}
	if _, err := cert.Verify(x509.VerifyOptions{Roots: other.Pool(), DNSName: "10.0.0.1"}); err == nil {
		t.Error("verified against another job's CA")
	}
	caBlock, _ := pem.Decode(ca.CertPEM())
	if caCert, err := x509.ParseCertificate(caBlock.Bytes); err != nil || !caCert.IsCA {
		t.Errorf("CA certificate: %v", err)
	}
}

// A TLS 1.3 connection over loopback with mutual authentication by the
// job's CA works; a client whose certificate another job's CA issued is
// refused.
func TestMutualTLS(t *testing.T) {
	ca, _ := New("j1", time.Hour)
	other, _ := New("j2", time.Hour)
	serverCert := keyPair(t, ca, "hub", "127.0.0.1")
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{serverCert}, ClientCAs: ca.Pool(),
		ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS13})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				c.SetDeadline(time.Now().Add(5 * time.Second))
				io.Copy(c, c)
			}()
		}
	}()
	dial := func(client tls.Certificate) error {
		c, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{RootCAs: ca.Pool(), Certificates: []tls.Certificate{client},
			ServerName: "127.0.0.1", MinVersion: tls.VersionTLS13})
		if err != nil {
			return err
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Write([]byte("x")); err != nil {
			return err
		}
		var b [1]byte
		_, err = io.ReadFull(c, b[:])
		return err
	}
	if err := dial(keyPair(t, ca, "leaf", "127.0.0.1")); err != nil {
		t.Fatalf("a client of the job: %v", err)
	}
	if err := dial(keyPair(t, other, "leaf", "127.0.0.1")); err == nil {
		t.Fatal("a client of another job's CA was let in")
	}
}

func keyPair(t *testing.T, ca *CA, name, host string) tls.Certificate {
	t.Helper()
	certPEM, keyPEM, err := ca.Issue(name, []string{host})
	if err != nil {
		t.Fatal(err)
	}
	kp, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return kp
}

func TestNewRefuses(t *testing.T) {
	for _, tt := range []struct {
		job string
		d   time.Duration
	}{{"", time.Hour}, {"j", 0}} {
		if _, err := New(tt.job, tt.d); err == nil {
			t.Errorf("New(%q, %v) made a CA", tt.job, tt.d)
		}
	}
}
