package launch

import (
	"bufio"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"strconv"
	"time"

	"github.com/monarch-go/monarch/internal/jobenv"
	"github.com/monarch-go/monarch/internal/jobstate"
)

// The restarts of an SPMD job's ranks ([spmd] max_restarts). The job's
// client (monarch spmd) restarts them itself; it tells the launcher of
// each on a pipe of its own (jobenv.SPMDReportVar), one JSON line a
// restart, which the launcher keeps in the job's record for monarch
// status. The client's line about it goes to the job's output as any of
// its lines.

// spmdReports is the launcher's end of an SPMD client's report pipe.
type spmdReports struct {
	r    *os.File
	done chan struct{} // closed once the reader has returned
}

// reportPipe gives cmd, an SPMD job's client about to start, the write
// end of a new pipe as its next extra file, named by SPMDReportVar. The
// caller closes the write end once the client has started (or failed
// to).
func reportPipe(cmd *exec.Cmd) (*spmdReports, *os.File, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, nil, err
	}
	cmd.ExtraFiles = append(cmd.ExtraFiles, w)
	cmd.Env = append(cmd.Env, jobenv.SPMDReportVar+"="+strconv.Itoa(2+len(cmd.ExtraFiles)))
	return &spmdReports{r: r, done: make(chan struct{})}, w, nil
}

// maxReport bounds a report line: one restart's summary.
const maxReport = 8 << 10

// record reads the reports into st until the client's end of the pipe
// is closed (it exited) or close is called.
func (s *spmdReports) record(st *jobstate.Writer) {
	go func() {
		defer close(s.done)
		sc := bufio.NewScanner(io.LimitReader(s.r, 1<<30))
		sc.Buffer(make([]byte, 0, 1024), maxReport)
		for sc.Scan() {
			var rs jobstate.SPMDRestart
			if json.Unmarshal(sc.Bytes(), &rs) != nil || rs.Restart < 1 {
				continue
			}
			rs.Summary, rs.Time = clip(rs.Summary, 1024), time.Now()
			st.Update(func(r *JobState) {
				r.SPMDRestarts = append(r.SPMDRestarts, rs)
				if n := len(r.SPMDRestarts); n > jobstate.MaxTail {
					r.SPMDRestarts = append(r.SPMDRestarts[:0:0], r.SPMDRestarts[n-jobstate.MaxTail:]...)
				}
			})
		}
	}()
}

// close waits (at most a second) for the reader to take what the client,
// which has ended, wrote last, then closes the pipe.
func (s *spmdReports) close() {
	if s == nil {
		return
	}
	select {
	case <-s.done:
	case <-time.After(time.Second):
	}
	s.r.Close()
	<-s.done
}
