// Package jobca is a job's own certificate authority: a key and a
// self-signed CA certificate made for one job, kept in memory and in the
// job's 0600 state, and the certificates it issues for the job's TLS
// servers and clients (the hub, leaves, routes). Every process of the
// job trusts the CA's certificate, which is public; the CA's key stays
// with the launcher and is gone with the job. A user who brings
// certificates of their own does not need it.
//
// Keys are ECDSA P-256: fast to make (well under a millisecond) and to
// handshake with, and accepted by every TLS 1.3 stack.
package jobca
