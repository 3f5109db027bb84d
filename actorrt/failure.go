package actorrt

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/monarch-go/monarch/internal/jobstate"
)

// The failure a client ends with. Before a client exits with a failure
// it says what failed: to its launcher, as one JSON message on the job's
// failure subject (the launcher records it and ends its output with its
// summary, `monarch status JOB` shows it), or, run without a launcher, in
// the job's record, which it keeps itself.

// Failure is what a job's client reports of the failure that ends it:
// the member (an SPMD rank, an actor) that failed, where, how, and the
// last lines it wrote to stderr. A program sets it on the ExitError its
// function returns (spmd does); an unhandled MeshFailure or another
// error makes one of its own.
//
// Its fields, as the job's record keeps them (the type is the record's):
//
//	Summary string   // one line: "rank 3 on h2 exited with status 1"
//	Mesh    string   // the mesh of the member that failed ("" for none)
//	Rank    int      // its rank; -1 for none
//	Host    string   // its host's name
//	Exit    int      // its exit status
//	Signal  string   // the signal that ended it ("" for none)
//	Tail    []string // the last lines it wrote to stderr, at most MaxTail
type Failure = jobstate.Failure

// MaxTail bounds Failure.Tail. The job record keeps as many lines
// (bounds_test.go does not compile if the two bounds differ).
const MaxTail = 20

// failureOf is the Failure of a client that ends with status code
// because of err (its function's error, or the unhandled failure the
// fault hook returned); nil when code is 0.
func (c *client) failureOf(err error, code int) *Failure {
	if code == 0 {
		return nil
	}
	var exit *ExitError
	if errors.As(err, &exit) && exit.Failure != nil {
		f := *exit.Failure
		if len(f.Tail) > MaxTail {
			f.Tail = f.Tail[len(f.Tail)-MaxTail:]
		}
		return &f
	}
	var mf *MeshFailure
	if errors.As(err, &mf) {
		host := c.counts.HostOf(mf.Proc)
		where := mf.Proc
		if host != "" {
			where = host
		}
		return &Failure{Summary: fmt.Sprintf("actor %s of mesh %s on %s failed: %s", mf.ActorID, mf.Mesh, where, mf.Reason),
			Mesh: mf.Mesh, Rank: mf.Base, Host: host}
	}
	f := &Failure{Summary: fmt.Sprintf("exited with status %d", code), Rank: -1, Exit: code}
	if err != nil && (exit == nil || exit.Err != nil) {
		f.Summary = err.Error()
	}
	return f
}

// failureWait bounds how long a client waits for its failure report to
// reach the bus before it exits.
const failureWait = 2 * time.Second

// reportFailure tells the launcher what failed, over the bus, and
// waits (bounded) until the message has left. A client that keeps the
// record itself writes it there instead (finishJobRecord).
func (c *client) reportFailure(f *Failure) {
	if f == nil || c.record != nil {
		return
	}
	b, err := json.Marshal(f)
	if err == nil {
		err = c.publish(c.subjects.Failure(), b)
	}
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), failureWait)
		err = c.link.Flush(ctx)
		cancel()
	}
	if err != nil {
		c.log.Warn().Err(err).Msg("cannot tell the launcher what failed")
	}
}
