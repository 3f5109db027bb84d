package systest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/monarch-go/monarch/internal/testcluster"
)

// Another user of the hosts (the test cluster's c.Other) tries to have
// the job run a program of theirs: a binary built into /tmp/<random>/train
// on the launcher's machine is planted at the same path on h2, with the
// same size and modification time (which the check's argv once showed to
// anyone running ps), by a user who could write there. The job must run
// what it was given, or fail saying why; never the planted file.

// planted is a job's program at a path in /tmp of this machine (which h1
// sees too), and the file another user planted at that path on h2, where
// that path is a private disk of h2's that anyone may write.
type planted struct {
	dir, program string
	mark         string // what the planted program makes on h2 if it runs
	cache        string // each host's own cache, a disk of its own
}

func plant(t *testing.T, c *testcluster.Cluster) *planted {
	t.Helper()
	dir, err := os.MkdirTemp("/tmp", "monarch-planted-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	p := &planted{dir: dir, program: filepath.Join(dir, "train"), mark: filepath.Join(dir, "PLANTED-RAN"), cache: t.TempDir()}
	data, err := os.ReadFile(filepath.Join(build(t), "multihost"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p.program, data, 0o755); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(p.program)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range c.Hosts {
		c.HostTmpfs(t, h, p.cache, "256m")
	}
	c.HostTmpfs(t, "h2", dir, "64m")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if out, err := c.SSH(ctx, "h2", "chmod 777 "+dir).CombinedOutput(); err != nil {
		t.Fatalf("h2: chmod: %v: %s", err, out)
	}
	// The planted program: a script that leaves its mark, padded to the
	// size of the real one, with its time.
	size, mtime := strconv.FormatInt(fi.Size(), 10), strconv.FormatInt(fi.ModTime().Unix(), 10)
	plantScript := `printf '#!/bin/sh\ntouch %s\nexit 1\n' "$2" >"$1"; truncate -s "$3" "$1"; chmod 755 "$1"; touch -d "@$4" "$1"; stat -c '%s %Y %U' "$1"`
	out, err := c.AsOther(ctx, "h2", "sh", "-c", plantScript, "sh", p.program, p.mark, size, mtime).CombinedOutput()
	if err != nil {
		t.Fatalf("plant on h2: %v: %s", err, out)
	}
	if want := size + " " + mtime + " " + c.Other.Name; strings.TrimSpace(string(out)) != want {
		t.Fatalf("planted on h2: %s, want %s", out, want)
	}
	return p
}

// ran says whether the planted program ran on h2.
func (p *planted) ran(t *testing.T, c *testcluster.Cluster) bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := c.SSH(ctx, "h2", "test -e "+p.mark+" && echo ran || echo not").CombinedOutput()
	if err != nil {
		t.Fatalf("h2: %v: %s", err, out)
	}
	return strings.TrimSpace(string(out)) == "ran"
}

// shipPlanted runs the job on hosts (the hosts file's lines before
// [ship]) with send = "auto", the default: h1 takes the program from its
// path (a copy of it in its cache), h2 refuses the planted one and is
// sent the program; the job runs, and the planted program never does.
// sent is the launcher's line saying so.
func shipPlanted(t *testing.T, c *testcluster.Cluster, hosts, untrusted, sent string) {
	p := plant(t, c)
	job := clusterJob(t, p.program, fmt.Sprintf("%s[ship]\ncache = %q\n", hosts, p.cache), "gpus = 4")
	out, stderr, code := runMonarch(t, c, 3*time.Minute, nil, "run", job)
	if p.ran(t, c) {
		t.Fatalf("the program planted on h2 ran (exit %d)\nstderr:\n%s", code, stderr)
	}
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, stderr)
	}
	checkTrainers(t, c, out)
	said := regexp.MustCompile(untrusted).FindString(stderr)
	if said == "" {
		t.Errorf("no word of the refused file, want %s; stderr:\n%s", untrusted, stderr)
	}
	t.Log(said)
	checkSent(t, stderr, sent)
	checkNothingLeft(t, p.program)
}

// TestShipPlantedSSH: over ssh, h2 refuses the planted program and is
// sent the job's.
func TestShipPlantedSSH(t *testing.T) {
	c := testcluster.Get(t)
	hosts := fmt.Sprintf("scheduler = \"ssh\"\n[ssh]\nhosts = [%q, %q]\nconfig_file = %q\n", c.Hosts[0], c.Hosts[1], c.SSHConfig)
	p := `/tmp/monarch-planted-\w+/train`
	shipPlanted(t, c, hosts,
		`(?m)^monarch: h2: program train \(`+p+`\) at `+p+` there is not taken: `+p+` belongs to `+c.Other.Name+` .*; sending it$`,
		`^monarch: sent program train \(`+p+`\) .* to h2 by ssh in`)
}

// TestShipPlantedSlurm: the same under Slurm: sbcast sends the job's
// program to both nodes, since one lacks it.
func TestShipPlantedSlurm(t *testing.T) {
	c := testcluster.Get(t)
	p := `/tmp/monarch-planted-\w+/train`
	shipPlanted(t, c, slurmShipHosts(c),
		`(?m)^monarch: program train \(`+p+`\) at `+p+` is not taken from there \(h2: `+p+` belongs to `+c.Other.Name+` .*\); sending it$`,
		`^monarch: sent program train \(`+p+`\) .* to h1,h2 by sbcast in`)
}

// TestShipUnsafeCache: a [ship] cache that another user may write to on
// h2, as a cache of a shared folder would be, fails the launch before
// anything is sent or run, naming the host, the folder, why, and what to
// set; over ssh and under Slurm, with an entry already there or not.
func TestShipUnsafeCache(t *testing.T) {
	c := testcluster.Get(t)
	for _, tt := range []struct{ name, hosts string }{
		{"ssh", fmt.Sprintf("scheduler = \"ssh\"\n[ssh]\nhosts = [%q, %q]\nconfig_file = %q\n", c.Hosts[0], c.Hosts[1], c.SSHConfig)},
		{"slurm", slurmShipHosts(c)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := newShipSetup(t, c, nil)
			job := clusterJob(t, filepath.Join(s.lo, "multihost"), fmt.Sprintf("%s[ship]\ncache = %q\n", tt.hosts, s.cache), "gpus = 1")
			if out, stderr, code := s.run(t, nil, "run", job); code != 0 {
				t.Fatalf("first run: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, stderr)
			}
			s.cached(t, "multihost")
			// The cache holds the job's binaries, checked; then someone
			// makes it anyone's to write.
			s.onHost(t, "h2", "chmod 777 "+s.cache)
			out, stderr, code := s.run(t, nil, "run", job)
			want := regexp.MustCompile(`(?m)^monarch: launch: (ssh |slurm: )h2: its binary cache \(` + regexp.QuoteMeta(s.cache) + `\) is refused: ` +
				regexp.QuoteMeta(s.cache) + ` is writable by others \(mode 0777\); .*: set \[ship\] cache in the hosts file to a folder that only you can write`)
			if code == 0 || !want.MatchString(stderr) || strings.Contains(stderr, "hosts up") || len(sentLines(stderr)) != 0 {
				t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, stderr)
			}
			t.Logf("exit %d: %s", code, want.FindString(stderr))
			checkGone(t, s.cache)
		})
	}
}
