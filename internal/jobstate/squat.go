package jobstate

import (
	"fmt"
	"io"
	"os"

	"github.com/monarch-go/monarch/hostsconfig"
	"github.com/monarch-go/monarch/internal/privfs"
)

// StepAround returns the state dir a launcher records its job in: dir,
// the default (hostsconfig.StateDir), unless another user squatted it (a
// folder of theirs, a link, one others can write, or one in a folder
// where they can rename it: /tmp/monarch-<uid> when there is no home).
// Then a fresh private dir takes its place, set in this process's
// environment (hostsconfig.EnvStateDir) for the job's processes started
// from here, and w is told where the records go and why. The job runs
// either way; err says only that no dir could be had.
func StepAround(dir string, w io.Writer) (string, error) {
	use, squatted, err := privfs.Replace(dir)
	if err != nil || squatted == nil {
		return use, err
	}
	if err := os.Setenv(hostsconfig.EnvStateDir, use); err != nil {
		return "", err
	}
	fmt.Fprintf(w, "monarch: this job's records go to %s instead (%s=%s monarch status shows it): %v\n",
		use, hostsconfig.EnvStateDir, use, squatted)
	return use, nil
}
