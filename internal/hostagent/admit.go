package hostagent

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/monarch-go/monarch/internal/hostlink"
	"github.com/monarch-go/monarch/internal/jobca"
	"github.com/monarch-go/monarch/internal/jobenv"
	"github.com/monarch-go/monarch/internal/munge"
)

// admission is what an agent holds once its job's link watcher admitted
// it: the job's token, and its host's certificate when the job has a CA
// of its own.
type admission struct {
	token string
	cert  *tls.Certificate
}

// admit holds agent's link to the job's link watcher (see
// internal/hostlink) until ctx ends, and returns what the first admission
// gave. Over TLS when the bus runs it, checking the watcher's
// certificate as the bus's; proving the token it holds, or, given none
// (env.LinkMunge, under Slurm), a MUNGE credential, for which the
// watcher sends the token. With the job's own CA it asks for a
// certificate for a key it makes here: its leaf shows it to the hub, a
// hub server of the host to the hub's other servers.
func admit(ctx context.Context, env jobenv.Env, job, agent string, timeout time.Duration) (admission, error) {
	o := hostlink.DialOptions{Addr: env.LinkWatcher, Agent: agent, Job: job, Timeout: timeout, Token: env.Bus.Token}
	// The link is checked as the bus is: the hub's CA and name.
	tlsConfig, err := ClientTLS(env.Bus).Config()
	if err != nil {
		return admission{}, err
	}
	o.TLS = tlsConfig
	if o.Token == "" {
		socket := env.LinkMunge
		if socket == "" {
			return admission{}, errors.New("no token, and no MUNGE socket to prove this agent with")
		}
		if socket == "-" {
			socket = ""
		}
		uid := os.Getuid() // the launcher's: only it may decode the credential
		o.Munge = func(ctx context.Context, payload []byte) ([]byte, error) {
			return munge.Encode(ctx, socket, payload, uid)
		}
	}
	var key *ecdsa.PrivateKey
	if env.Bus.TLSName == jobca.HubName {
		if key, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader); err != nil {
			return admission{}, err
		}
		o.Key = key
	}
	adm, err := hostlink.Dial(ctx, o)
	if err != nil {
		return admission{}, err
	}
	a := admission{token: adm.Token}
	if key != nil {
		cert, err := certificate(adm.CertPEM, key)
		if err != nil {
			return admission{}, fmt.Errorf("the certificate from the job's link watcher: %w", err)
		}
		a.cert = cert
	}
	return a, nil
}

// certificate is certPEM with key, for crypto/tls.
func certificate(certPEM []byte, key *ecdsa.PrivateKey) (*tls.Certificate, error) {
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	c, err := tls.X509KeyPair(certPEM, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}))
	if err != nil {
		return nil, err
	}
	return &c, nil
}
