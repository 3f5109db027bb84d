package jobstate

import (
	"time"

	"github.com/monarch-go/monarch/hostsconfig"
	"github.com/monarch-go/monarch/logagg"
)

// PruneSystemLogs removes this user's old system logs (see
// logagg.PruneSystemLogs); a job whose record says it may still run keeps
// its files. It is cheap: every client and host agent does it as it
// starts.
func PruneSystemLogs(now time.Time) {
	stateDir := hostsconfig.StateDir()
	logagg.PruneSystemLogs(logagg.SystemLogDir(), now, func(job string) bool {
		r, err := Load(stateDir, job)
		return err == nil && r.Active()
	})
}
