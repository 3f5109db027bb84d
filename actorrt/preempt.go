package actorrt

import (
	"context"
	"fmt"
	"os"
	"reflect"
	"sync"
	"time"

	"github.com/monarch-go/monarch/internal/jobenv"
	"github.com/monarch-go/monarch/internal/wire"
	"github.com/vmihailenco/msgpack/v5"
)

// Preemption and stops. A job learns it is about to end from its client:
// SIGUSR1 (a time-limit warning: `monarch run` sends it signal_before
// ahead of a Slurm job's time limit, or Slurm does, --signal=B:USR1) or
// SIGTERM (a stop: monarch stop, SIGTERM to monarch run, a preemption).
// The client tells the program and every proc of the job (one message on
// the job's notice subject); Preempted delivers the notice to whoever
// waits on it, actors included. A stop also cancels the program's context,
// with the notice as its cause, and gives the program the job's stop grace
// to return before the procs are stopped.

// PreemptNotice says the job is about to end.
type PreemptNotice struct {
	// Reason says why: "time limit", "stop requested (SIGTERM)".
	Reason string
	// Deadline is when the job will be torn down; zero when not known.
	Deadline time.Time
	// Stop: the job is stopping now (the program's context is cancelled);
	// false for a warning, after which the job runs on until Deadline.
	Stop bool
}

// Error makes a notice the cause of the context it cancels
// (context.Cause).
func (n *PreemptNotice) Error() string {
	if n.Deadline.IsZero() {
		return "actorrt: job ending: " + n.Reason
	}
	return fmt.Sprintf("actorrt: job ending: %s; torn down in %v", n.Reason, time.Until(n.Deadline).Round(time.Second))
}

// maxNoticeReason bounds a notice's reason read off the wire.
const maxNoticeReason = 1 << 10

// noticeWire is a notice on the job's notice subject.
type noticeWire struct {
	Reason   string `msgpack:"reason"`
	Deadline int64  `msgpack:"deadline"` // Unix nanoseconds; 0: unknown
	Stop     bool   `msgpack:"stop"`
}

func encodeNotice(n PreemptNotice) ([]byte, error) {
	w := noticeWire{Reason: n.Reason, Stop: n.Stop}
	if !n.Deadline.IsZero() {
		w.Deadline = n.Deadline.UnixNano()
	}
	return msgpack.Marshal(&w)
}

func decodeNotice(b []byte) (PreemptNotice, error) {
	var w noticeWire
	if err := wire.DecodePayload(b, []reflect.Type{reflect.TypeOf(w)}, func(d *msgpack.Decoder) error { return d.Decode(&w) }); err != nil {
		return PreemptNotice{}, err
	}
	if len(w.Reason) > maxNoticeReason || w.Deadline < 0 {
		return PreemptNotice{}, fmt.Errorf("notice: reason of %d bytes, deadline %d", len(w.Reason), w.Deadline)
	}
	n := PreemptNotice{Reason: w.Reason, Stop: w.Stop}
	if w.Deadline != 0 {
		n.Deadline = time.Unix(0, w.Deadline)
	}
	return n, nil
}

// notices keeps this process's notices and who waits for them.
type notices struct {
	mu   sync.Mutex
	seen []PreemptNotice
	subs map[chan PreemptNotice]struct{}
}

// deliver records n and hands it to every waiter. A warning repeated (the
// launcher's timer and Slurm's signal both) is told once.
func (ns *notices) deliver(n PreemptNotice) bool {
	ns.mu.Lock()
	defer ns.mu.Unlock()
	for _, s := range ns.seen {
		if s.Stop == n.Stop {
			return false
		}
	}
	ns.seen = append(ns.seen, n)
	for ch := range ns.subs {
		select {
		case ch <- n:
		default: // it holds the two notices a job can have
		}
	}
	return true
}

// Preempted delivers to the caller every notice this process receives
// that the job is about to end (a warning, then a stop), until ctx ends;
// notices received before the call come first. It works in the client
// and in every proc, so an actor can wait on it to checkpoint: select on
// it beside its work. The channel holds both notices a job can have.
//
// ctx says whose notices: Main's ctx, one derived from it, or an actor's
// *Context (in Init, it lasts as long as the actor). A ctx of no runtime
// (context.Background()) hears nothing, and Preempted says so on stderr.
func Preempted(ctx context.Context) <-chan PreemptNotice {
	ch := make(chan PreemptNotice, 2)
	rt, err := runtimeOf(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, "actorrt: Preempted: no notice will arrive:", err)
		return ch
	}
	ns := &rt.ending
	ns.mu.Lock()
	for _, n := range ns.seen {
		ch <- n
	}
	if ns.subs == nil {
		ns.subs = map[chan PreemptNotice]struct{}{}
	}
	ns.subs[ch] = struct{}{}
	ns.mu.Unlock()
	go func() {
		select {
		case <-ctx.Done():
		case <-rt.ctx.Done():
		}
		ns.mu.Lock()
		delete(ns.subs, ch)
		ns.mu.Unlock()
	}()
	return ch
}

// RestartCount is how many times the job was started before this run: a
// requeued Slurm batch job's count (MONARCH_RESTART_COUNT, from
// SLURM_RESTART_COUNT), 0 the first time. A program resumes from its
// checkpoint when it is above 0.
func RestartCount() int { return jobenv.Restarts() }

// announce tells the client and every proc of the job.
func (c *client) announce(n PreemptNotice) {
	rt := c.core
	if !rt.ending.deliver(n) {
		return
	}
	b, err := encodeNotice(n)
	if err == nil {
		err = rt.publish(rt.subjects.Notice(), b)
	}
	if err != nil {
		rt.log.Warn().Err(err).Msg("cannot tell the procs that the job is ending")
	}
}

// noticed takes a notice the client published on the job's notice
// subject.
func (w *worker) noticed(data []byte) {
	rt := w.core
	n, err := decodeNotice(data)
	if err != nil {
		rt.drop(wire.DropBody, rt.subjects.Notice(), err)
		return
	}
	rt.ending.deliver(n)
}
