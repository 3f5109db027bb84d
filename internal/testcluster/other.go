package testcluster

import (
	"context"
	"os/exec"
	"strconv"
)

// AsOther returns a command that runs name with args as c.Other, an
// unprivileged user who shares the hosts with the job's, on host: "" for
// this machine, else "h1", "h2", ... (in the host's network, UTS and mount
// namespaces, as a process of that host would be). It has no
// capabilities, no supplementary groups and an environment of its own
// (PATH, HOME=/tmp, USER): what another user of a cluster's nodes has.
func (c *Cluster) AsOther(ctx context.Context, host, name string, args ...string) *exec.Cmd {
	argv := []string{"setpriv",
		"--reuid=" + strconv.Itoa(c.Other.UID), "--regid=" + strconv.Itoa(c.Other.GID), "--clear-groups",
		"--inh-caps=-all", "--bounding-set=-all", "--no-new-privs", "--", name}
	argv = append(argv, args...)
	if host != "" {
		pid, err := c.holder(host)
		if err != nil {
			// The command fails when run, saying why.
			return exec.CommandContext(ctx, "sh", "-c", `echo "$1" >&2; exit 1`, "sh", err.Error())
		}
		argv = append([]string{"nsenter", "-t", strconv.Itoa(pid), "--net", "--uts", "--mount", "--"}, argv...)
	}
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/tmp", "USER=" + c.Other.Name, "LOGNAME=" + c.Other.Name}
	return cmd
}
