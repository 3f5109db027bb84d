package launch

import (
	"context"
	"crypto"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/monarch-go/monarch/bus"
	"github.com/monarch-go/monarch/hostsconfig"
	"github.com/monarch-go/monarch/internal/hostlink"
	"github.com/monarch-go/monarch/internal/jobca"
	"github.com/monarch-go/monarch/internal/jobenv"
	"github.com/monarch-go/monarch/internal/munge"
)

// linkWatch holds the host agents' links (internal/hostlink) and tells
// the job, on each agent's Link subject, when one goes up or down: the
// signal that confirms, or not, a host whose heartbeats stopped. A link
// that is down is said again every second for the health's lost_after,
// for the processes that start watching that agent later.
type linkWatch struct {
	w    *hostlink.Watcher
	addr string // where agents dial it
	conn *bus.Conn
	subj jobenv.Subjects

	mu   sync.Mutex
	down map[string]string // agent -> cause, while down
	stop chan struct{}
	done sync.WaitGroup
}

// startLinkWatch listens beside the job's bus (on its listen host, dialed
// at its advertised one) and publishes through conn.
func startLinkWatch(jb *jobBus, h hostsconfig.Health, conn *bus.Conn, job string) (*linkWatch, error) {
	lw := &linkWatch{conn: conn, subj: jobenv.SubjectsOf(job), down: map[string]string{}, stop: make(chan struct{})}
	o := hostlink.WatcherOptions{Host: jb.listenHost, Token: jb.srv.Token(), Timeout: h.LinkTimeout,
		OnEvent: lw.event, ValidID: jobenv.IsAgentID, Job: job}
	if jb.serverTLS != nil {
		// The links are TLS as the bus is, with the hub's certificate:
		// agents check it as they check the hub's.
		o.TLS = jb.serverTLS.Config()
		o.Unmunge = unmunge
	}
	if ca := jb.ca; ca != nil {
		// Every agent's certificate names the hub: a hub host's server
		// is one of the hub, and a leaf's name is never checked.
		o.Certify = func(agent string, pub crypto.PublicKey, _ []string) ([]byte, error) {
			return ca.Sign(agent, pub, []string{jobca.HubName})
		}
	}
	w, err := hostlink.Listen(o)
	if err != nil {
		return nil, err
	}
	lw.w, lw.addr = w, net.JoinHostPort(jb.advHost, strconv.Itoa(w.Port()))
	lw.done.Add(1)
	go lw.repeat(h.LostAfter)
	return lw, nil
}

// unmunge decodes an agent's MUNGE credential with the munged Slurm uses
// (agents under Slurm come without the token: see mungeToken).
func unmunge(ctx context.Context, cred []byte) (uint32, []byte, error) {
	socket, err := slurmMungeSocket(ctx)
	if err != nil {
		return 0, nil, err
	}
	c, err := munge.Decode(ctx, socket, cred)
	return c.UID, c.Payload, err
}

// slurmMungeSocket is munge.SocketFromSlurm, asked once per launcher: the
// agents' start (mungeToken) and every admission need it. A failure is
// not kept: the next caller asks again.
func slurmMungeSocket(ctx context.Context) (string, error) {
	mungeSocket.mu.Lock()
	defer mungeSocket.mu.Unlock()
	if !mungeSocket.known {
		path, err := munge.SocketFromSlurm(ctx)
		if err != nil {
			return "", err
		}
		mungeSocket.path, mungeSocket.known = path, true
	}
	return mungeSocket.path, nil
}

var mungeSocket struct {
	mu    sync.Mutex
	path  string
	known bool
}

func (lw *linkWatch) event(e hostlink.Event) {
	lw.mu.Lock()
	if e.Up {
		delete(lw.down, e.Agent)
	} else {
		lw.down[e.Agent] = e.Cause
	}
	lw.mu.Unlock()
	lw.publish(e.Agent, e.Up, e.Cause)
}

func (lw *linkWatch) publish(agent string, up bool, cause string) {
	msg := "up"
	if !up {
		msg = "down " + cause
	}
	lw.conn.Publish(lw.subj.Link(agent), []byte(msg))
}

// repeat says the links that are down again every second, each for
// lostAfter after it went down: by then every watcher has judged it.
func (lw *linkWatch) repeat(lostAfter time.Duration) {
	defer lw.done.Done()
	since := map[string]time.Time{}
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-lw.stop:
			return
		case now := <-t.C:
			lw.mu.Lock()
			down := make(map[string]string, len(lw.down))
			for a, c := range lw.down {
				down[a] = c
			}
			lw.mu.Unlock()
			for a := range since {
				if _, ok := down[a]; !ok {
					delete(since, a)
				}
			}
			for a, cause := range down {
				if _, ok := since[a]; !ok {
					since[a] = now
				}
				if now.Sub(since[a]) <= lostAfter {
					lw.publish(a, false, cause)
				}
			}
		}
	}
}

func (lw *linkWatch) close() {
	close(lw.stop)
	lw.w.Close()
	lw.done.Wait()
}
