package hostsconfig

import (
	"os"
	"path/filepath"
	"strconv"
)

// EnvStateDir names the variable that overrides StateDir.
const EnvStateDir = "MONARCH_STATE_DIR"

// StateDir is where launchers and clients keep their jobs' records (state
// for `monarch status`, logs for `monarch logs`): $MONARCH_STATE_DIR, else
// ~/.monarch/jobs. A home directory is usually shared by a cluster's
// nodes, so a batch job's records are visible from the login node.
func StateDir() string {
	if d := os.Getenv(EnvStateDir); d != "" {
		return d
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return filepath.Join(os.TempDir(), "monarch-"+strconv.Itoa(os.Getuid()), "jobs")
	}
	return filepath.Join(home, ".monarch", "jobs")
}
