// Package testenv keeps a test run out of the user's own monarch dirs.
// Tests start real jobs, and every job leaves a record and a log in the
// job store (~/.monarch/jobs) and maybe system logs (/tmp/$USER): run
// against the real dirs, test jobs would show in the user's `monarch
// status` and pile up there. So each test binary that starts processes
// or writes job state begins its TestMain with Setup, which points HOME,
// MONARCH_STATE_DIR, MONARCH_SYSLOG_DIR and TMPDIR at a fresh temporary
// dir (children inherit them: procs, agents, helper processes), and ends
// it with Finish, which removes that dir and checks that the run left
// nothing in the real dirs.
//
//	func TestMain(m *testing.M) {
//		env := testenv.Setup()
//		os.Exit(env.Finish(m.Run()))
//	}
//
// The check: Setup also sets MONARCH_JOB_PREFIX to a prefix of its own,
// so every job id made in the run starts with it, and Finish looks in the
// real dirs for files named after such a job. Unlike comparing listings
// before and after, this sees only this run's files, not those of the
// user's jobs or other test runs going on at the same time; and it sees a
// process that lost the temporary environment (a remote shell that resets
// it, say) as long as it writes its job's files on this machine.
//
// A process started by a test binary that is itself such a binary (a
// proc of an actorrt test re-executes the test binary) finds the
// environment set up: there Setup and Finish do nothing.
package testenv

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/monarch-go/monarch/hostsconfig"
	"github.com/monarch-go/monarch/internal/jobstate"
	"github.com/monarch-go/monarch/logagg"
)

// envMarker is set to the run's temporary dir in the tests' environment.
const envMarker = "MONARCH_TESTENV"

// Env is a test run's environment.
type Env struct {
	root   string   // the temporary dir; "" in a child process
	prefix string   // of the run's job ids
	real   []string // the user's dirs, checked by Finish
	before map[string]bool
}

// Setup points the run at a fresh temporary dir (see the package doc).
// extra names more dirs for Finish to check (where the test cluster's
// hosts would put their state, say). It exits the process if it cannot
// set up: tests must not run against the real dirs.
func Setup(extra ...string) *Env {
	if os.Getenv(envMarker) != "" {
		return &Env{}
	}
	e, err := setup(extra)
	if err != nil {
		fmt.Fprintf(os.Stderr, "testenv: %v\n", err)
		os.Exit(2)
	}
	return e
}

func setup(extra []string) (*Env, error) {
	uid := strconv.Itoa(os.Getuid())
	e := &Env{
		prefix: "t" + strings.ToLower(rand.Text()[:8]) + "-",
		real: append([]string{hostsconfig.StateDir(), logagg.SystemLogDir(),
			filepath.Join(os.TempDir(), "monarch-"+uid, "jobs")}, extra...),
		before: map[string]bool{},
	}
	for _, d := range e.real {
		_, err := os.Stat(d)
		e.before[d] = err == nil
	}
	// The go command keeps its caches and settings under HOME: tests that
	// build programs must find them where they are.
	goEnv := map[string]string{}
	if out, err := exec.Command("go", "env", "GOCACHE", "GOMODCACHE", "GOPATH", "GOENV").Output(); err == nil {
		vals := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
		for i, k := range []string{"GOCACHE", "GOMODCACHE", "GOPATH", "GOENV"} {
			if i < len(vals) && vals[i] != "" {
				goEnv[k] = vals[i]
			}
		}
	}
	root, err := os.MkdirTemp("", "monarch-test-")
	if err != nil {
		return nil, err
	}
	e.root = root
	home, tmp := filepath.Join(root, "home"), filepath.Join(root, "tmp")
	for _, d := range []string{home, tmp} {
		if err := os.Mkdir(d, 0o700); err != nil {
			os.RemoveAll(root)
			return nil, err
		}
	}
	// MONARCH_* are set, not only HOME and TMPDIR: they also pass where
	// a launcher forwards only those (the test cluster's ssh).
	vars := map[string]string{
		"HOME":                  home,
		"TMPDIR":                tmp,
		hostsconfig.EnvStateDir: filepath.Join(home, ".monarch", "jobs"),
		logagg.EnvSystemLogDir:  filepath.Join(tmp, "monarch-logs"),
		jobstate.EnvIDPrefix:    e.prefix,
		envMarker:               root,
	}
	for k, v := range goEnv {
		vars[k] = v
	}
	for k, v := range vars {
		if err := os.Setenv(k, v); err != nil {
			os.RemoveAll(root)
			return nil, err
		}
	}
	return e, nil
}

// Root is the run's temporary dir ("" in a child process).
func (e *Env) Root() string { return e.root }

// Finish removes the run's temporary dir and checks the real dirs: it
// returns code, or 1 (after saying why on stderr) if the run left files
// there.
func (e *Env) Finish(code int) int {
	if e.root == "" {
		return code
	}
	os.RemoveAll(e.root)
	if leaks := e.Leaks(); len(leaks) > 0 {
		fmt.Fprintf(os.Stderr, "testenv: the tests wrote outside their temporary dirs (into the user's own):\n  %s\n",
			strings.Join(leaks, "\n  "))
		if code == 0 {
			code = 1
		}
	}
	return code
}

// Leaks lists what this run left in the real dirs: files of its jobs
// (named after a job id with the run's prefix), and real dirs that did not
// exist before the run and do now.
func (e *Env) Leaks() []string {
	var leaks []string
	for _, d := range e.real {
		entries, err := os.ReadDir(d)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if !e.before[d] && err == nil {
			leaks = append(leaks, d+" (created during the run)")
		}
		for _, de := range entries {
			if strings.Contains(de.Name(), e.prefix) {
				leaks = append(leaks, filepath.Join(d, de.Name()))
			}
		}
	}
	slices.Sort(leaks)
	return slices.Compact(leaks)
}
