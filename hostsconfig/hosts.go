package hostsconfig

import (
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Schedulers: how the hosts of a job are obtained.
const (
	// SchedulerSlurm: the nodes of a Slurm allocation, the current one or
	// one that salloc or sbatch gets.
	SchedulerSlurm = "slurm"
	// SchedulerSSH: a fixed list of hosts reached over ssh.
	SchedulerSSH = "ssh"
	// SchedulerLocal: simulated hosts, all on this machine.
	SchedulerLocal = "local"
)

// Defaults of a MONARCH_HOSTS file, applied by LoadHosts.
const (
	// DefaultSlurmImmediate bounds how long srun and salloc wait for
	// resources: a job that cannot get them fails instead of hanging.
	DefaultSlurmImmediate = 30 * time.Second
	// DefaultSSHConnectTimeout bounds each ssh connection attempt.
	DefaultSSHConnectTimeout = 10 * time.Second
	// DefaultSSHParallel is how many ssh sessions may be setting up at
	// once: enough for speed, few enough not to trip sshd's MaxStartups.
	DefaultSSHParallel = 32
)

// Hosts is a MONARCH_HOSTS file: the hosts of a job and how they are
// obtained. LoadHosts fills in every default, so a launcher reads the
// values as they are.
type Hosts struct {
	// Path is the absolute name of the file read; empty when the hosts
	// are a [hosts] table of a job file.
	Path string
	// Scheduler is SchedulerSlurm, SchedulerSSH or SchedulerLocal.
	Scheduler string
	// Slurm, SSH and Local hold the settings of the chosen scheduler
	// (never nil for it, defaults applied); the other two are nil.
	Slurm *Slurm
	SSH   *SSH
	Local *Local
	// Bus is where the job's bus listens and what workers dial.
	Bus Bus
	// Ship says whether the program and monarch are sent to the hosts.
	Ship Ship
	// Health is how hosts are watched: heartbeats and timeouts.
	Health Health
}

// Slurm is the [slurm] table.
type Slurm struct {
	// Nodes is how many nodes to allocate when the job is not already
	// inside an allocation. 0 (not given) means: inside an allocation,
	// all of its nodes; outside one the launcher refuses to guess.
	Nodes int
	// GPUsPerNode is passed as --gpus-per-node when > 0.
	GPUsPerNode int
	// Partition, Time and Account are passed to salloc/sbatch when set.
	// Time is checked to be a Slurm time limit.
	Partition, Time, Account string
	// SbatchArgs are extra arguments of salloc and sbatch, SrunArgs of srun.
	SbatchArgs, SrunArgs []string
	// Immediate is how long srun and salloc may wait for resources
	// (--immediate, in whole seconds, rounded up); always > 0.
	Immediate time.Duration
	// Monarch is the absolute path of the monarch binary on the nodes;
	// empty for the launcher's own path.
	Monarch string
	// SignalBefore is how long before the time limit the program is
	// warned (actorrt.Preempted); 0: not warned. Default
	// DefaultSignalBefore.
	SignalBefore time.Duration
	// Requeue submits batch jobs with --requeue: a preempted or failed
	// node's job comes back, its restarts counted in
	// MONARCH_RESTART_COUNT.
	Requeue bool
	// Flags names the keys the command line set for one run (monarch run
	// --nodes ...), each with its flag, so that a message about one
	// names the flag, not the file; nil when none did.
	Flags map[string]string
}

// DefaultSignalBefore is [slurm] signal_before's default.
const DefaultSignalBefore = 120 * time.Second

// MaxSignalBefore is the longest warning Slurm can give (--signal's
// sig_time).
const MaxSignalBefore = 65535 * time.Second

// SSH is the [ssh] table.
type SSH struct {
	// Hosts are the hosts, in order: host i is the job's host i. Never
	// empty, no duplicates.
	Hosts []string
	// User and Port are ssh's -l and -p; empty and 0 leave them to ssh.
	User string
	Port int
	// IdentityFile (-i) and ConfigFile (-F) are absolute names of files
	// that existed when the file was loaded; empty when not given.
	IdentityFile, ConfigFile string
	// Options are "Key=Value" options, each passed as -o.
	Options []string
	// ConnectTimeout bounds each connection attempt; always > 0.
	ConnectTimeout time.Duration
	// Parallel is how many sessions may be setting up at once; >= 1.
	Parallel int
	// Monarch is as for Slurm.
	Monarch string
}

// Local is the [local] table.
type Local struct {
	// Hosts is the number of simulated hosts; >= 1.
	Hosts int
}

// Bus is the [bus] table. Remote hosts cannot reach a loopback address,
// so for the slurm and ssh schedulers LoadHosts refuses one in Listen and
// Advertise instead of letting the job time out later.
type Bus struct {
	// Listen is the IP:port the bus listens on: default "127.0.0.1:0"
	// for local, "0.0.0.0:0" otherwise (port 0: any free port).
	Listen string
	// Advertise is the host, or host:port, workers dial: default
	// "127.0.0.1" for local; otherwise empty, decided at launch.
	Advertise string
	// TLS is [bus] tls: auto (left out), on or off.
	TLS TLSMode
	// TLSCert and TLSKey (always both or neither) and TLSCA are absolute
	// names of files that were read and checked when the file was
	// loaded: the user's own certificate, in place of the job's CA.
	TLSCert, TLSKey, TLSCA string
	// Hubs is how many NATS servers make up the job's hub, which every
	// host's leaf links to: 1 (the default), the launcher's; more, joined
	// by routes, adds one on each of the hosts 0..Hubs-2. At most the
	// number of hosts; with the user's own certificate, one.
	Hubs int
	// Direct (leaf_nodes = false) runs no leaf node on the hosts: every
	// proc dials the hub. Fewer hops for a few hosts; the hub then holds
	// one connection per proc and fans out every broadcast to each.
	Direct bool
}

// MaxHubs bounds [bus] hubs.
const MaxHubs = 64

// LoadHosts reads a MONARCH_HOSTS file. Its error lists every problem
// found (see ConfigError).
func LoadHosts(path string) (*Hosts, error) {
	var errs errorList
	h := loadHosts(path, &errs)
	if err := errs.err(); err != nil {
		return nil, err
	}
	return h, nil
}

func loadHosts(path string, errs *errorList) *Hosts {
	t := parseFile(path, errs)
	if t == nil || t.isJobFile() {
		return nil
	}
	h := readHosts(t)
	h.Path = filepath.Join(t.doc.dir, filepath.Base(path))
	return h
}

// readHosts reads the hosts schema from t: a whole file, or the [hosts]
// table of a job file.
func readHosts(t *table) *Hosts {
	h := &Hosts{}
	t.unknown(hostsKeys()...)
	var sched string
	switch {
	case !t.has("scheduler"):
		t.missing("scheduler")
	case t.str("scheduler", &sched):
		switch sched {
		case SchedulerSlurm, SchedulerSSH, SchedulerLocal:
			h.Scheduler = sched
		default:
			t.fail("scheduler", `want "slurm", "ssh" or "local", got %q`, sched)
		}
	}
	// With no valid scheduler, which table belongs is unknown: the
	// scheduler error alone says what to fix.
	for _, name := range []string{SchedulerSlurm, SchedulerSSH, SchedulerLocal} {
		sub := t.sub(name)
		switch {
		case sub == nil || h.Scheduler == "":
		case name != h.Scheduler:
			if sub.m != nil {
				sub.failTable("[%s] given but scheduler is %q", sub.key, h.Scheduler)
			}
		case name == SchedulerSlurm:
			h.Slurm = readSlurm(sub)
		case name == SchedulerSSH:
			h.SSH = readSSH(sub)
		case name == SchedulerLocal:
			h.Local = readLocal(sub)
		}
	}
	if sub := t.sub("bus"); sub != nil {
		h.Bus = readBus(sub, h.Scheduler, h.numHosts())
	}
	if sub := t.sub("ship"); sub != nil && h.Scheduler != "" {
		h.Ship = readShip(sub, h.Scheduler)
	}
	h.Health = DefaultHealth()
	if sub := t.sub("health"); sub != nil && sub.m != nil {
		h.Health = readHealth(sub)
	}
	return h
}

// numHosts is the number of hosts the file names; 0 when it does not say
// (Slurm inside an allocation: all of its nodes).
func (h *Hosts) numHosts() int {
	switch {
	case h.Slurm != nil:
		return h.Slurm.Nodes
	case h.SSH != nil:
		return len(h.SSH.Hosts)
	case h.Local != nil:
		return h.Local.Hosts
	}
	return 0
}

func readSlurm(t *table) *Slurm {
	s := &Slurm{Immediate: DefaultSlurmImmediate, SignalBefore: DefaultSignalBefore}
	t.unknown("nodes", "gpus_per_node", "partition", "time", "account", "sbatch_args", "srun_args", "immediate", "monarch",
		"signal_before", "requeue")
	if t.integer("nodes", &s.Nodes) && s.Nodes < 1 {
		t.fail("nodes", "want at least 1, got %d (leave nodes out to use every node of the allocation)", s.Nodes)
	}
	if t.integer("gpus_per_node", &s.GPUsPerNode) && s.GPUsPerNode < 0 {
		t.fail("gpus_per_node", "want 0 or more, got %d", s.GPUsPerNode)
	}
	t.str("partition", &s.Partition)
	t.str("account", &s.Account)
	if t.str("time", &s.Time) && !validSlurmTime(s.Time) {
		t.fail("time", "want a Slurm time limit (MM, MM:SS, HH:MM:SS, D-HH, D-HH:MM or D-HH:MM:SS), got %q", s.Time)
	}
	t.args("sbatch_args", &s.SbatchArgs)
	t.args("srun_args", &s.SrunArgs)
	if t.duration("immediate", &s.Immediate) && s.Immediate <= 0 {
		t.fail("immediate", "want more than 0s (every wait for resources is bounded), got %v", s.Immediate)
	}
	t.monarchPath(&s.Monarch)
	if t.duration("signal_before", &s.SignalBefore) {
		limit, ok := SlurmTimeLimit(s.Time)
		switch {
		case s.SignalBefore < 0 || s.SignalBefore > MaxSignalBefore:
			t.fail("signal_before", "want 0s (no warning) to %v, got %v", MaxSignalBefore, s.SignalBefore)
		case s.SignalBefore%time.Second != 0:
			t.fail("signal_before", "want whole seconds (Slurm's unit), got %v", s.SignalBefore)
		case ok && s.SignalBefore >= limit:
			t.fail("signal_before", "%v is not shorter than the time limit (time = %q): the warning would come at the start", s.SignalBefore, s.Time)
		}
	} else if limit, ok := SlurmTimeLimit(s.Time); ok && s.SignalBefore >= limit {
		s.SignalBefore = limit / 2 // a short limit: warn half way
	}
	t.boolean("requeue", &s.Requeue)
	return s
}

// SlurmTimeLimit is a Slurm time limit as a duration (MM, MM:SS,
// HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS); false for an empty or invalid
// one.
func SlurmTimeLimit(s string) (time.Duration, bool) {
	if s == "" || !validSlurmTime(s) {
		return 0, false
	}
	days, rest, hasDays := strings.Cut(s, "-")
	if !hasDays {
		rest, days = s, "0"
	}
	var n []time.Duration
	for _, p := range strings.Split(rest, ":") {
		v, _ := strconv.Atoi(p)
		n = append(n, time.Duration(v))
	}
	d, _ := strconv.Atoi(days)
	total := time.Duration(d) * 24 * time.Hour
	switch {
	case hasDays: // D-HH, D-HH:MM, D-HH:MM:SS
		units := []time.Duration{time.Hour, time.Minute, time.Second}
		for i, v := range n {
			total += v * units[i]
		}
	case len(n) == 1: // MM
		total += n[0] * time.Minute
	case len(n) == 2: // MM:SS
		total += n[0]*time.Minute + n[1]*time.Second
	default: // HH:MM:SS
		total += n[0]*time.Hour + n[1]*time.Minute + n[2]*time.Second
	}
	return total, true
}

func readSSH(t *table) *SSH {
	s := &SSH{ConnectTimeout: DefaultSSHConnectTimeout, Parallel: DefaultSSHParallel}
	t.unknown("hosts", "user", "port", "identity_file", "config_file", "options", "connect_timeout", "parallel", "monarch")
	switch {
	case !t.has("hosts"):
		t.missing("hosts")
	case t.strings("hosts", &s.Hosts):
		if len(s.Hosts) == 0 {
			t.fail("hosts", "want at least one host")
		}
		first := map[string]int{}
		for i, h := range s.Hosts {
			j, dup := first[h]
			switch {
			case strings.TrimSpace(h) == "":
				t.failElem("hosts", elem(i), "empty host name")
			case strings.ContainsAny(h, " \t\r\n"):
				t.failElem("hosts", elem(i), "host name %q contains a blank", h)
			case dup:
				t.failElem("hosts", elem(i), "%q is listed twice (also hosts[%d])", h, j)
			default:
				first[h] = i
			}
		}
	}
	if t.str("user", &s.User) && (s.User == "" || strings.ContainsAny(s.User, " \t\r\n@")) {
		t.fail("user", "want a user name, got %q", s.User)
	}
	if t.integer("port", &s.Port) && (s.Port < 1 || s.Port > 65535) {
		t.fail("port", "want a port from 1 to 65535, got %d", s.Port)
	}
	t.existingFile("identity_file", &s.IdentityFile)
	t.existingFile("config_file", &s.ConfigFile)
	if t.strings("options", &s.Options) {
		for i, o := range s.Options {
			if k, _, ok := strings.Cut(o, "="); !ok || k == "" || strings.ContainsAny(k, " \t") {
				t.failElem("options", elem(i), `want "Key=Value", such as "StrictHostKeyChecking=no", got %q`, o)
			}
		}
	}
	if t.duration("connect_timeout", &s.ConnectTimeout) && s.ConnectTimeout <= 0 {
		t.fail("connect_timeout", "want more than 0s, got %v", s.ConnectTimeout)
	}
	if t.integer("parallel", &s.Parallel) && s.Parallel < 1 {
		t.fail("parallel", "want at least 1, got %d", s.Parallel)
	}
	t.monarchPath(&s.Monarch)
	return s
}

func readLocal(t *table) *Local {
	l := &Local{Hosts: 1}
	t.unknown("hosts")
	if t.integer("hosts", &l.Hosts) && l.Hosts < 1 {
		t.fail("hosts", "want at least 1, got %d", l.Hosts)
	}
	return l
}

func readBus(t *table, sched string, hosts int) Bus {
	b := Bus{Listen: "0.0.0.0:0", Hubs: 1}
	if sched == SchedulerLocal {
		b = Bus{Listen: "127.0.0.1:0", Advertise: "127.0.0.1", Hubs: 1}
	}
	// A scheduler error is reported already; loopback is then no issue.
	remote := sched == SchedulerSlurm || sched == SchedulerSSH
	t.unknown("listen", "advertise", "tls", "tls_cert", "tls_key", "tls_ca", "hubs", "leaf_nodes")
	var s string
	if t.str("listen", &s) {
		host, port, err := net.SplitHostPort(s)
		n, perr := strconv.Atoi(port)
		ip := net.ParseIP(host)
		switch {
		case err != nil || perr != nil || n < 0 || n > 65535 || host != "" && ip == nil:
			t.fail("listen", `want IP:port, such as "0.0.0.0:0" (port 0: any free port), got %q`, s)
		case remote && ip != nil && ip.IsLoopback():
			t.fail("listen", "%s is a loopback address, which the other hosts cannot reach (scheduler is %q): use \"0.0.0.0:0\" or an address of this host on their network", s, sched)
		default:
			b.Listen = s
		}
	}
	if t.str("advertise", &s) {
		host := s
		if ip := net.ParseIP(s); ip == nil {
			if h, port, err := net.SplitHostPort(s); err == nil {
				host = h
				if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
					host = ""
				}
			}
		}
		switch ip := net.ParseIP(host); {
		case host == "" || strings.ContainsAny(host, " \t\r\n/@[]"):
			t.fail("advertise", `want a host or host:port that workers dial, such as "10.0.0.1", got %q`, s)
		case remote && (host == "localhost" || ip != nil && ip.IsLoopback()):
			t.fail("advertise", "%s is a loopback address, which the other hosts cannot reach (scheduler is %q): give this host's address on their network, or leave advertise out", s, sched)
		default:
			b.Advertise = s
		}
	}
	t.existingFile("tls_cert", &b.TLSCert)
	t.existingFile("tls_key", &b.TLSKey)
	t.existingFile("tls_ca", &b.TLSCA)
	switch {
	case t.has("tls_cert") && !t.has("tls_key"):
		t.fail("tls_cert", "given without %s: give both or neither", t.name("tls_key"))
	case t.has("tls_key") && !t.has("tls_cert"):
		t.fail("tls_key", "given without %s: give both or neither", t.name("tls_cert"))
	case t.has("tls_ca") && !t.has("tls_cert"):
		t.fail("tls_ca", "given without %s and %s, which TLS needs", t.name("tls_cert"), t.name("tls_key"))
	default:
		t.checkTLSFiles(&b)
	}
	var on bool
	if t.boolean("tls", &on) {
		b.TLS = TLSOff
		if on {
			b.TLS = TLSOn
		}
		if !on && t.has("tls_cert") {
			t.fail("tls", "false, but %s is given: leave one of them out", t.name("tls_cert"))
		}
	}
	if t.integer("hubs", &b.Hubs) {
		switch {
		case b.Hubs < 1 || b.Hubs > MaxHubs:
			t.fail("hubs", "want from 1 to %d NATS servers, got %d", MaxHubs, b.Hubs)
		case hosts > 0 && b.Hubs > hosts:
			t.fail("hubs", "want at most the number of hosts (%d): the launcher runs one server, hosts 0..hubs-2 the others, got %d", hosts, b.Hubs)
		case b.Hubs > 1 && t.has("tls_cert"):
			t.fail("hubs", "a hub of %d servers takes the job's own CA, not a certificate of yours (its hosts would need your key): leave hubs out, or %s out", b.Hubs, t.name("tls_cert"))
		}
		if b.Hubs < 1 || b.Hubs > MaxHubs {
			b.Hubs = 1
		}
	}
	leaves := true
	if t.boolean("leaf_nodes", &leaves) && !leaves {
		b.Direct = true
		if b.Hubs > 1 {
			t.fail("leaf_nodes", "false, but hubs = %d: a hub of several servers is for the hosts' leaf nodes to link to; leave one of them out", b.Hubs)
		}
	}
	return b
}

// args reads extra command-line arguments: strings, none empty.
func (t *table) args(k string, dst *[]string) {
	if !t.strings(k, dst) {
		return
	}
	for i, a := range *dst {
		if a == "" {
			t.failElem(k, elem(i), "empty argument")
		}
	}
}

// monarchPath reads the "monarch" key: a path on the remote hosts, so it
// is only checked to be absolute, not to exist here.
func (t *table) monarchPath(dst *string) {
	if t.str("monarch", dst) && *dst != "" && !filepath.IsAbs(*dst) {
		t.fail("monarch", "want an absolute path of the monarch binary on the hosts, got %q", *dst)
		*dst = ""
	}
}

// validSlurmTime reports whether s is a time limit Slurm accepts:
// MM, MM:SS, HH:MM:SS, D-HH, D-HH:MM or D-HH:MM:SS.
func validSlurmTime(s string) bool {
	days, rest, hasDays := strings.Cut(s, "-")
	if !hasDays {
		rest = s
	} else if !allDigits(days) {
		return false
	}
	parts := strings.Split(rest, ":")
	if len(parts) > 3 {
		return false
	}
	for i, p := range parts {
		if !allDigits(p) {
			return false
		}
		first := i == 0
		n, _ := strconv.Atoi(p)
		switch {
		case first && !hasDays: // minutes or hours: any size
		case first && hasDays && (len(p) > 2 || n > 23):
			return false
		case !first && (len(p) > 2 || n > 59):
			return false
		}
	}
	return true
}

func allDigits(s string) bool {
	if s == "" || len(s) > 9 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
