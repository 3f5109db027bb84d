package launch

import (
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/monarch-go/monarch/internal/jobenv"
	"github.com/monarch-go/monarch/internal/jobstate"
)

// TestSPMDReports: the SPMD client's restart reports reach the job's
// record, the last jobstate.MaxTail of them; lines that are not reports
// are dropped; close returns once the client's end is closed.
func TestSPMDReports(t *testing.T) {
	dir := t.TempDir()
	st, err := jobstate.NewWriter(dir, jobstate.Record{Job: "j1", State: StateRunning, Started: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("true")
	cmd.ExtraFiles = make([]*os.File, 2)
	reports, w, err := reportPipe(cmd)
	if err != nil {
		t.Fatal(err)
	}
	if len(cmd.ExtraFiles) != 3 || cmd.Env[len(cmd.Env)-1] != jobenv.SPMDReportVar+"=5" {
		t.Fatalf("extra files %d, env %q; want the pipe as fd 5", len(cmd.ExtraFiles), cmd.Env)
	}
	reports.record(st)
	w.Write([]byte("not json\n{\"restart\": 0}\n"))
	for i := 1; i <= jobstate.MaxTail+2; i++ {
		w.Write([]byte(`{"restart": ` + strconv.Itoa(i) + `, "max_restarts": 30, "summary": "rank 1 on h0 exited with status 1"}` + "\n"))
	}
	w.Close()
	start := time.Now()
	reports.close()
	if d := time.Since(start); d > 500*time.Millisecond {
		t.Errorf("close took %v after the client's end closed", d)
	}
	st.Finish(func(*jobstate.Record) {})
	rec, err := jobstate.Load(dir, "j1")
	if err != nil {
		t.Fatal(err)
	}
	rs := rec.SPMDRestarts
	if len(rs) != jobstate.MaxTail || rs[0].Restart != 3 || rs[len(rs)-1].Restart != jobstate.MaxTail+2 ||
		rs[0].MaxRestarts != 30 || rs[0].Summary != "rank 1 on h0 exited with status 1" || rs[0].Time.IsZero() {
		t.Errorf("record's restarts: %+v", rs)
	}
}
