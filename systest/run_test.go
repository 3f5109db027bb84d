package systest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/monarch-go/monarch/internal/testenv"
)

// TestRunLocalJob runs a job file on two simulated hosts with monarch run:
// the local scheduler, progress lines, the job's procs, state for status.
func TestRunLocalJob(t *testing.T) {
	dir := t.TempDir()
	testenv.WriteFile(t, dir, "hosts.toml", "scheduler = \"local\"\n[local]\nhosts = 2\n")
	job := testenv.WriteFile(t, dir, "job.toml", fmt.Sprintf("program = %q\nhosts = \"hosts.toml\"\n[procs]\ngpus = 2\n", filepath.Join(build(t), "multihost")))
	state := t.TempDir()
	out, stderr, code := monarchEnv(t, []string{"MONARCH_STATE_DIR=" + state}, "run", job)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, stderr)
	}
	if !strings.Contains(out, "Process mesh extent: {hosts: 2, gpus: 2}") || strings.Count(out, "taking a step") != 4 {
		t.Fatalf("output:\n%s", out)
	}
	if !strings.Contains(stderr, "hosts up 2/2") {
		t.Errorf("no progress lines:\n%s", stderr)
	}
	status, _, code := monarchEnv(t, []string{"MONARCH_STATE_DIR=" + state}, "status")
	if code != 0 || !strings.Contains(status, " done ") || !strings.Contains(status, "local") {
		t.Fatalf("status:\n%s", status)
	}
	if _, stderr, code := monarchEnv(t, []string{"MONARCH_STATE_DIR=" + state}, "stop", "nosuchjob"); code != 1 || !strings.Contains(stderr, "known jobs") {
		t.Fatalf("stop of an unknown job: %d %s", code, stderr)
	}
}

// TestRunLocalTLS runs a job whose bus uses TLS: every connection (client,
// agents, procs) verifies the bus's certificate.
func TestRunLocalTLS(t *testing.T) {
	dir := t.TempDir()
	cert, key := selfSignedLoopback(t, dir)
	testenv.WriteFile(t, dir, "hosts.toml", fmt.Sprintf("scheduler = \"local\"\n[local]\nhosts = 2\n[bus]\ntls_cert = %q\ntls_key = %q\ntls_ca = %q\n", cert, key, cert))
	job := testenv.WriteFile(t, dir, "job.toml", fmt.Sprintf("program = %q\nhosts = \"hosts.toml\"\n[procs]\ngpus = 1\n", filepath.Join(build(t), "multihost")))
	out, stderr, code := monarchEnv(t, []string{"MONARCH_STATE_DIR=" + t.TempDir()}, "run", job)
	if code != 0 || strings.Count(out, "taking a step") != 2 {
		t.Fatalf("exit %d\n%s\n%s", code, out, stderr)
	}
}

// TestRunLocalHubOfThree runs, on four simulated hosts whose hub is
// three servers (the launcher's, h0's, h1's), rounds of procs spawned on
// h0 and sent to at once by an actor on h1, which the client tells: a
// path round three servers, where a subscription is not known everywhere
// before the message unless the procs wait for every server (without
// that, a round in about eighty lost its messages).
func TestRunLocalHubOfThree(t *testing.T) {
	dir := t.TempDir()
	testenv.WriteFile(t, dir, "hosts.toml", "scheduler = \"local\"\n[local]\nhosts = 4\n[bus]\nhubs = 3\n")
	job := testenv.WriteFile(t, dir, "job.toml", fmt.Sprintf("program = %q\nargs = [\"100\"]\nhosts = \"hosts.toml\"\n", filepath.Join(build(t), "race")))
	start := time.Now()
	out, stderr, code := monarchEnv(t, []string{"MONARCH_STATE_DIR=" + t.TempDir()}, "run", job)
	if code != 0 || !strings.Contains(out, "RACE OK 100") {
		t.Fatalf("exit %d\n%s\n%s", code, out, stderr)
	}
	t.Logf("100 rounds on a hub of three: %v", time.Since(start).Round(time.Millisecond))
}

// TestRunAgentCannotReachLauncher: hosts that cannot reach the launcher
// (a wrong advertised address) fail the job at start, saying where they
// tried and why: an agent dials the launcher's link watcher first, where
// it is admitted, before its leaf links to the hub at the same address.
func TestRunAgentCannotReachLauncher(t *testing.T) {
	dir := t.TempDir()
	// The bus listens on 127.0.0.1 only: nothing answers at 127.0.0.2.
	testenv.WriteFile(t, dir, "hosts.toml", "scheduler = \"local\"\n[local]\nhosts = 1\n[bus]\nlisten = \"127.0.0.1:0\"\nadvertise = \"127.0.0.2\"\n")
	job := testenv.WriteFile(t, dir, "job.toml", fmt.Sprintf("program = %q\nhosts = \"hosts.toml\"\n", filepath.Join(build(t), "multihost")))
	start := time.Now()
	_, stderr, code := monarchEnv(t, []string{"MONARCH_STATE_DIR=" + t.TempDir()}, "run", job)
	if code != 1 || !strings.Contains(stderr, "host agents could not start") || !strings.Contains(stderr, "link watcher at 127.0.0.2:") ||
		!strings.Contains(stderr, "connection refused") {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	t.Logf("after %v: %s", time.Since(start).Round(time.Millisecond), stderr)
}

// monarchEnv is monarch with extra environment (set for this test).
func monarchEnv(t *testing.T, env []string, args ...string) (string, string, int) {
	t.Helper()
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	return monarch(t, args...)
}

func selfSignedLoopback(t *testing.T, dir string) (string, string) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	kd, _ := x509.MarshalECPrivateKey(k)
	cert, key := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	os.WriteFile(cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
	os.WriteFile(key, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kd}), 0o600)
	return cert, key
}
