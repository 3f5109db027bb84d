package testcluster

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// HostTmpfs mounts a tmpfs of size (as mount's size=, "16m") on dir as
// host sees it, in host's own mount namespace: what host's processes
// (its sshd's sessions, its slurmd's steps) then write under dir stays on
// host, unseen by this machine and the other hosts, as a host's local
// disk would. dir must exist. The mount goes when t ends.
func (c *Cluster) HostTmpfs(t testing.TB, host, dir, size string) {
	t.Helper()
	if err := c.inHost(host, "mount", "-t", "tmpfs", "-o", "size="+size+",mode=0700", "tmpfs", dir); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// A daemon of the host may hold a file there a little longer
		// (slurmd, a broadcast cut short): wait for it, then detach the
		// mount anyway; it goes once the file is closed.
		var err error
		for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(500 * time.Millisecond) {
			if err = c.inHost(host, "umount", dir); err == nil {
				return
			}
		}
		if err := c.inHost(host, "umount", "--lazy", dir); err != nil {
			t.Error(err)
		}
	})
}

// inHost runs argv in host's mount namespace (its holder process's),
// bounded.
func (c *Cluster) inHost(host string, argv ...string) error {
	pid, err := c.holder(host)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	args := append([]string{"-t", strconv.Itoa(pid), "--mount", "--"}, argv...)
	if out, err := exec.CommandContext(ctx, "nsenter", args...).CombinedOutput(); err != nil {
		return fmt.Errorf("on %s: %s: %v: %s", host, strings.Join(argv, " "), err, out)
	}
	return nil
}

// holder is the pid of the process holding host's namespaces.
func (c *Cluster) holder(host string) (int, error) {
	b, err := os.ReadFile(filepath.Join(c.Base, "run", "holder-"+host+".pid"))
	if err != nil {
		return 0, fmt.Errorf("host %s: %w", host, err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0, fmt.Errorf("host %s: holder pid %q: %w", host, b, err)
	}
	return pid, nil
}
