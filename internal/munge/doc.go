// Package munge makes and checks MUNGE credentials, the proof of identity
// Slurm itself uses between hosts (auth/munge): a credential says which
// uid and gid made it, carries a payload, and only a munged holding the
// cluster's key can make or read one.
//
// It runs the munge and unmunge programs of the munge package (which
// Slurm's auth/munge needs on every host) rather than binding libmunge
// with cgo: they are that library's own clients, so a credential is
// checked exactly as Slurm checks it, and the binary stays pure Go.
//
// # Usage
//
//	sock, err := munge.SocketFromSlurm(ctx) // Slurm's AuthInfo socket=, or ""
//	cred, err := munge.Encode(ctx, sock, payload, os.Getuid())
//	// ... cred crosses to another host of the cluster ...
//	c, err := munge.Decode(ctx, sock, cred) // c.UID, c.GID, c.Payload
//
// A socket of "" is munged's default (/run/munge/munge.socket.2 on most
// systems).
//
// # What a decoded credential proves
//
// Decode returns a credential only when munged calls it valid: made with
// the cluster's key, within its time to live (300 s by default), and not
// seen before. munged keeps every credential it decoded until it expires
// and refuses one decoded twice (a replay), so a credential proves its
// maker once, to one reader; one that is expired, replayed, or restricted
// to another uid is an error (a *StatusError naming munged's reason).
// Until it is decoded a credential is a bearer proof: whoever sees it may
// present it first. Send it over an encrypted channel, to the one reader
// it is meant for, and bind its payload to that exchange.
package munge
