package testcluster

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/monarch-go/monarch/internal/procstat"
)

// Cluster is a running test cluster, as described by $BASE/cluster.env.
type Cluster struct {
	Base      string // directory holding configs, logs and state
	SlurmConf string // slurm.conf; every Slurm command needs SLURM_CONF set to it
	SSHConfig string // ssh client config: ssh -F SSHConfig h1 ...
	SSHKey    string // private key accepted by every sshd of the cluster
	Advertise string // this machine's address as seen from the hosts
	Partition string // the (default) Slurm partition
	Hosts     []string
	Addrs     []string // each host's address, as Hosts
	Env       []string // environment for Slurm commands: SLURM_CONF=...
	// Other is an unprivileged user of the hosts who is not the job's:
	// security tests act as it (AsOther).
	Other User
}

// User is an account of the hosts.
type User struct {
	Name     string
	UID, GID int
}

// Proc is a running process.
type Proc struct {
	PID     int
	Cmdline string // arguments joined by spaces
}

const (
	defaultBase = "/tmp/monarch-cluster"
	// start.sh may install packages first, waiting for another apt-get.
	startTimeout = 20 * time.Minute
	stopTimeout  = 2 * time.Minute
	lockTimeout  = 5 * time.Minute
)

var (
	once    sync.Once
	mu      sync.Mutex
	cluster *Cluster
	skip    string // why the cluster cannot run here
	fail    string // why starting it failed
	started bool   // this process ran start.sh successfully
	root    string // module root
	// A shared lock on $BASE/users.lock, held while this process uses the
	// cluster; kept referenced so that it is not closed by a finalizer.
	users *os.File
)

// Get starts the cluster once per test binary and returns it. It skips the
// test when the cluster cannot run here (not root, or start.sh exits with
// status 3), or fails it instead when MONARCH_REQUIRE_CLUSTER=1. Any other
// start failure fails the test with start.sh's output.
func Get(t testing.TB) *Cluster {
	t.Helper()
	once.Do(start)
	switch {
	case skip != "":
		if os.Getenv("MONARCH_REQUIRE_CLUSTER") == "1" {
			t.Fatalf("test cluster required (MONARCH_REQUIRE_CLUSTER=1) but it cannot run here: %s", skip)
		}
		t.Skipf("test cluster cannot run here: %s", skip)
	case fail != "":
		t.Fatal(fail)
	}
	holdNet(t, syscall.LOCK_SH)
	return cluster
}

// GetCutter is Get for a test that cuts hosts' links (CutLink): it waits
// until no other test, of any test binary, is using the cluster's network
// (each Get holds a shared lock on $BASE/net.lock until its test ends),
// and keeps them waiting until it ends.
func GetCutter(t testing.TB) *Cluster {
	t.Helper()
	once.Do(start)
	if skip != "" || fail != "" {
		return Get(t)
	}
	holdNet(t, syscall.LOCK_EX)
	return cluster
}

// holdNet locks $BASE/net.lock (how: LOCK_SH or LOCK_EX) until t ends.
func holdNet(t testing.TB, how int) {
	t.Helper()
	f, err := lockFile(filepath.Join(cluster.Base, "net.lock"), how)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
}

// CutLink takes host's link down (its netns's eth0) for d, then up again,
// and returns when it is up. The test must have the cluster from
// GetCutter.
func (c *Cluster) CutLink(t testing.TB, host string, d time.Duration) {
	t.Helper()
	ns, err := c.netns(host)
	if err != nil {
		t.Fatal(err)
	}
	link := func(state string) {
		if out, err := exec.Command("ip", "-n", ns, "link", "set", "eth0", state).CombinedOutput(); err != nil {
			t.Fatalf("ip -n %s link set eth0 %s: %v: %s", ns, state, err, out)
		}
	}
	link("down")
	defer link("up") // also when the test fails meanwhile: the cluster is shared
	time.Sleep(d)
}

// netns is host's network namespace.
func (c *Cluster) netns(host string) (string, error) { return c.hostName(host, "NAMESPACES") }

// veth is the name of host's veth peer on the bridge, in this machine's
// namespace.
func (c *Cluster) veth(host string) (string, error) { return c.hostName(host, "VETHS") }

// hostName is host's entry in the list key (NAMESPACES or VETHS) of
// $BASE/run/names, whose entries follow the order of Hosts.
func (c *Cluster) hostName(host, key string) (string, error) {
	path := filepath.Join(c.Base, "run", "names")
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(string(b), "\n") {
		v, ok := strings.CutPrefix(line, key+"=")
		if !ok {
			continue
		}
		names := strings.Fields(strings.Trim(v, `"`))
		if len(names) != len(c.Hosts) {
			return "", fmt.Errorf("%s: %d %s for hosts %v", path, len(names), key, c.Hosts)
		}
		for i, h := range c.Hosts {
			if h == host {
				return names[i], nil
			}
		}
		return "", fmt.Errorf("no host %q in %v", host, c.Hosts)
	}
	return "", fmt.Errorf("%s: no %s line", path, key)
}

// StopIfStarted runs stop.sh if Get started the cluster in this process
// and no other process is still using it (see the package doc). Call it
// from TestMain after m.Run; Get must not be called afterwards.
func StopIfStarted() {
	mu.Lock()
	defer mu.Unlock()
	if !started {
		return
	}
	started = false
	defer func() {
		users.Close()
		users = nil
	}()
	if os.Getenv("MONARCH_KEEP_CLUSTER") == "1" {
		return
	}
	// Others hold shared locks while they use the cluster: the last one
	// out stops it. (A failed upgrade drops our shared lock: we are done.)
	if err := syscall.Flock(int(users.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		return
	}
	out, _, err := runScript("stop.sh", stopTimeout)
	if err != nil {
		fmt.Fprintf(os.Stderr, "testcluster: testdata/cluster/stop.sh: %v\n%s\n", err, out)
	}
}

// Procs lists the running processes whose command line contains substr,
// zombies excluded (their parent has not reaped them yet, but they run no
// more). The calling process and its ancestors (go test, the shell) are
// never listed.
func Procs(substr string) []Proc {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	skipPIDs := ancestors()
	var procs []Proc
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || skipPIDs[pid] {
			continue
		}
		state, _, ok := stat(pid)
		if !ok || state == 'Z' || state == 'X' {
			continue
		}
		raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil || len(raw) == 0 {
			continue // gone, or a kernel thread
		}
		cmdline := strings.TrimRight(string(bytes.ReplaceAll(raw, []byte{0}, []byte{' '})), " ")
		if strings.Contains(cmdline, substr) {
			procs = append(procs, Proc{PID: pid, Cmdline: cmdline})
		}
	}
	sort.Slice(procs, func(i, j int) bool { return procs[i].PID < procs[j].PID })
	return procs
}

// WaitNoProcs polls Procs(substr) until it is empty or d has passed, and
// returns what is still running (nil when nothing is).
func WaitNoProcs(substr string, d time.Duration) []Proc {
	deadline := time.Now().Add(d)
	for {
		procs := Procs(substr)
		if len(procs) == 0 || !time.Now().Before(deadline) {
			return procs
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Command returns a command with c.Env added to this process's environment,
// for srun, salloc, sbatch, sinfo, squeue, scontrol and scancel.
func (c *Cluster) Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(os.Environ(), c.Env...)
	return cmd
}

// SSH returns an ssh command running args on host ("h1", "h2", or "lo" for
// this machine) with the cluster's client config.
func (c *Cluster) SSH(ctx context.Context, host string, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, "ssh", append([]string{"-F", c.SSHConfig, host}, args...)...)
}

// SSHHome is the HOME of the cluster's ssh sessions (start.sh sets it in
// each sshd's config): where an agent started over ssh would keep its
// state if MONARCH_STATE_DIR did not reach it.
func SSHHome() string { return filepath.Join(base(), "ssh", "home") }

func base() string {
	if b := os.Getenv("MONARCH_CLUSTER_BASE"); b != "" {
		return b
	}
	return defaultBase
}

func start() {
	mu.Lock()
	defer mu.Unlock()
	if os.Geteuid() != 0 {
		skip = "needs root (network namespaces, Slurm and sshd daemons)"
		return
	}
	var err error
	if root, err = moduleRoot(); err != nil {
		fail = "testcluster: " + err.Error()
		return
	}
	b := base()
	if err := os.MkdirAll(b, 0o755); err != nil {
		fail = "testcluster: " + err.Error()
		return
	}
	f, err := lockShared(filepath.Join(b, "users.lock"))
	if err != nil {
		fail = "testcluster: " + err.Error()
		return
	}
	out, code, err := runScript("start.sh", startTimeout)
	if code == 3 {
		f.Close()
		skip = "testdata/cluster/start.sh: " + ownLines(out)
		return
	}
	if err != nil {
		f.Close()
		fail = fmt.Sprintf("testdata/cluster/start.sh: %v\n%s", err, out)
		return
	}
	c, err := load(b)
	if err != nil {
		f.Close()
		fail = "testcluster: " + err.Error()
		return
	}
	cluster, users, started = c, f, true
}

// ownLines returns the script's own messages from out (not apt-get's).
func ownLines(out string) string {
	var own []string
	for _, l := range strings.Split(out, "\n") {
		if msg, ok := strings.CutPrefix(l, "start.sh: "); ok {
			own = append(own, msg)
		}
	}
	if len(own) == 0 {
		return strings.TrimSpace(out)
	}
	return strings.Join(own, "; ")
}

// lockShared takes a shared flock on path, waiting (bounded) while a
// stopping process holds it exclusively.
func lockShared(path string) (*os.File, error) { return lockFile(path, syscall.LOCK_SH) }

// lockFile opens path and locks it (how: LOCK_SH or LOCK_EX), waiting
// lockTimeout at most.
func lockFile(path string, how int) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(lockTimeout)
	for {
		err := syscall.Flock(int(f.Fd()), how|syscall.LOCK_NB)
		if err == nil {
			return f, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) || time.Now().After(deadline) {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// runScript runs testdata/cluster/<name> with BASE set and returns its
// combined output and exit code. Output goes to a file, not a pipe: the
// daemons the script starts must not keep us waiting for EOF.
func runScript(name string, timeout time.Duration) (string, int, error) {
	tmp, err := os.CreateTemp("", "monarch-cluster-*.log")
	if err != nil {
		return "", -1, err
	}
	defer os.Remove(tmp.Name())
	defer tmp.Close()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", filepath.Join(root, "testdata", "cluster", name))
	cmd.Env = append(os.Environ(), "BASE="+base())
	cmd.Stdout, cmd.Stderr = tmp, tmp
	// Its own process group, so a timeout stops the script and its
	// helpers (flock, ssh, srun), not the daemons, which detach.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM) }
	cmd.WaitDelay = 10 * time.Second
	err = cmd.Run()
	out, _ := os.ReadFile(tmp.Name())
	code := -1
	if cmd.ProcessState != nil {
		code = cmd.ProcessState.ExitCode()
	}
	if ctx.Err() != nil {
		err = fmt.Errorf("timed out after %v: %w", timeout, err)
	}
	return string(out), code, err
}

// load reads $BASE/cluster.env (KEY=VALUE lines, values maybe quoted).
func load(b string) (*Cluster, error) {
	path := filepath.Join(b, "cluster.env")
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	kv := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			return nil, fmt.Errorf("%s: bad line %q", path, line)
		}
		if uq, err := strconv.Unquote(v); err == nil {
			v = uq
		}
		kv[k] = v
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	for _, k := range []string{"BASE", "SLURM_CONF", "SSH_CONFIG", "SSH_KEY", "HOSTS", "ADDRS", "ADVERTISE", "PARTITION", "OTHER_USER", "OTHER_UID", "OTHER_GID"} {
		if kv[k] == "" {
			return nil, fmt.Errorf("%s: no %s", path, k)
		}
	}
	other := User{Name: kv["OTHER_USER"]}
	var err1, err2 error
	other.UID, err1 = strconv.Atoi(kv["OTHER_UID"])
	other.GID, err2 = strconv.Atoi(kv["OTHER_GID"])
	if err := errors.Join(err1, err2); err != nil || other.UID <= 0 {
		return nil, fmt.Errorf("%s: OTHER_UID %q, OTHER_GID %q: want the ids of an unprivileged user", path, kv["OTHER_UID"], kv["OTHER_GID"])
	}
	return &Cluster{
		Base:      kv["BASE"],
		SlurmConf: kv["SLURM_CONF"],
		SSHConfig: kv["SSH_CONFIG"],
		SSHKey:    kv["SSH_KEY"],
		Advertise: kv["ADVERTISE"],
		Partition: kv["PARTITION"],
		Hosts:     strings.Fields(kv["HOSTS"]),
		Addrs:     strings.Fields(kv["ADDRS"]),
		Env:       []string{"SLURM_CONF=" + kv["SLURM_CONF"]},
		Other:     other,
	}, nil
}

// moduleRoot walks up from the working directory to the directory holding
// go.mod.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			if _, err := os.Stat(filepath.Join(dir, "testdata", "cluster", "start.sh")); err != nil {
				return "", fmt.Errorf("module root %s has no testdata/cluster/start.sh", dir)
			}
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory")
		}
		dir = parent
	}
}

// stat returns the state letter and parent pid from /proc/PID/stat.
func stat(pid int) (state byte, ppid int, ok bool) {
	st, err := procstat.Read(pid)
	return st.State, st.PPID, err == nil
}

// ancestors returns this process and its ancestors.
func ancestors() map[int]bool {
	m := map[int]bool{}
	for pid := os.Getpid(); pid > 0 && !m[pid]; {
		m[pid] = true
		_, ppid, ok := stat(pid)
		if !ok {
			break
		}
		pid = ppid
	}
	return m
}
