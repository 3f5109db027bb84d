package jobenv

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/monarch-go/monarch/hostsconfig"
	"github.com/monarch-go/monarch/logagg"
)

// The variables. Each is spelled here and nowhere else: writers call
// Environ, readers FromEnviron.
const (
	varJob        = "MONARCH_JOB"
	varBusURL     = "MONARCH_BUS_URL"
	varBusToken   = "MONARCH_BUS_TOKEN"
	varTLSCA      = "MONARCH_BUS_TLS_CA"
	varTLSName    = "MONARCH_BUS_TLS_NAME"
	varBusLeaf    = "MONARCH_BUS_LEAF"
	varBusHubs    = "MONARCH_BUS_HUBS"
	varBusSecure  = "MONARCH_BUS_SECURE"
	varBusRoute   = "MONARCH_BUS_ROUTE"
	varHubHosts   = "MONARCH_BUS_HUB_HOSTS"
	varBusLocal   = "MONARCH_BUS_LOCAL"
	varHostBus    = "MONARCH_HOST_BUS"
	varHostAgents = "MONARCH_HOST_AGENTS"
	varProcs      = "MONARCH_PROCS"
	varLogStream  = "MONARCH_LOG_STREAM"
	varLogWindow  = "MONARCH_LOG_WINDOW"
	varHostName   = "MONARCH_HOST_NAME"
	varHostAddr   = "MONARCH_HOST_ADDR"
	varProc       = "MONARCH_PROC"
	varParent     = "MONARCH_PARENT"
	varReadyPort  = "MONARCH_READY_PORT"
	varReadyRank  = "MONARCH_READY_RANK"
	varAgent      = "MONARCH_AGENT"
	varSpare      = "MONARCH_SPARE"
	varStopGrace  = "MONARCH_STOP_GRACE"
	varJobEnd     = "MONARCH_JOB_END"
	varHealth     = "MONARCH_HEALTH"
	varLinks      = "MONARCH_LINK_WATCHER"
	varLinkMunge  = "MONARCH_LINK_MUNGE"
	varSealedEnv  = "MONARCH_SEALED_ENV"
	varExecOff    = "MONARCH_EXEC_OFF"
	varDashAt     = "MONARCH_DASHBOARD_AT"
	// DashboardVar is where a job's client serves its dashboard: an
	// address (host:port) or "off" (hostsconfig.DashboardOff). A launcher
	// sets it from the job file's [dashboard], and the file's line with
	// it; a program run directly reads the user's.
	DashboardVar = "MONARCH_DASHBOARD"
	// RestartVar counts the job's restarts: its batch job's requeues
	// (SLURM_RESTART_COUNT), 0 the first time. The launcher sets it for
	// the client and every proc, SPMD commands included.
	RestartVar = "MONARCH_RESTART_COUNT"
	// FeedVar, "off" (or "0", "false"), turns the job state feed's
	// counting off in the process that has it: no message counted, no
	// handler timed (the state op still answers, its counts zero). The
	// launcher sets it for the client and every proc when the job file
	// says [feed] enabled = false; a user may set it for a run. Children
	// inherit it.
	FeedVar = "MONARCH_FEED"
	// Per-dimension ranks of a proc: MONARCH_RANK_<DIM>, MONARCH_SIZE_<DIM>.
	prefixRank = "MONARCH_RANK_"
	prefixSize = "MONARCH_SIZE_"
)

// HostsVar is the variable that names the job's hosts file: the one a
// program passes to actorrt.HostsFromConfig, and the one `monarch run`
// sets for its client.
const HostsVar = "MONARCH_HOSTS"

// Bus says how to reach a job's bus.
type Bus struct {
	URL   string
	Token string // the job's secret: removed from the environment once read (see Unset)
	// With TLS: the CA certificates (PEM, public) the bus's certificate
	// must chain to, empty for the system's; and the name it must carry.
	TLSCA   string
	TLSName string
	// Secure says the job's links between hosts run TLS, for a process
	// whose own link does not (a leaf's proc, on loopback): what it serves
	// to other hosts (ibverbs' buffer server) must then be encrypted too.
	Secure bool
	// Leaf is where a host's leaf links to the job's hub (the hub's
	// bus.Server.LeafURL); empty where the process is not to run a host's
	// bus (see hostagent.StartHostBus).
	Leaf string
	// Hubs is how many servers the job's hub has, when more than one
	// (the hosts file's [bus] hubs): a process's first message after a
	// subscription waits until all know it (bus.ConnOptions.HubServers).
	// Route is then, for a host agent, the route URL of the first, which
	// the hub's other servers join.
	Hubs  int
	Route string
	// HubHosts names the hosts whose agents run the hub's other servers
	// (hosts 0..Hubs-2), for messages: the launcher knows the hosts'
	// names, an agent only its own.
	HubHosts []string
	// Local is, for a proc of a host whose bus is a leaf of the hub, the
	// key of that host (its agent's id): the bus delivers the subjects of
	// the procs whose ids start with Local+"." on the host (see
	// Subjects.Inbox). Empty: every proc subscribes its public subject.
	Local string
}

// Env is everything a process of a job learns from its environment. A
// field left zero is not set.
type Env struct {
	Job string
	Bus Bus

	// For the client, from its launcher.
	HostAgents int               // host agents the launcher started; 0: none
	Procs      []hostsconfig.Dim // the job file's [procs]
	LogStream  *bool             // the job file's [log] stream_to_client
	LogWindow  time.Duration     // the job file's [log] aggregate_window
	HostsFile  string            // the hosts file (HostsVar)
	// StopGrace is how long the program has to return once asked to
	// stop (SIGTERM): the job file's stop_grace; 0: the default.
	StopGrace time.Duration
	// JobEnd is when the scheduler ends the job (its time limit); zero
	// when it has none or it is not known.
	JobEnd time.Time
	// ExecOff is where the job file turns `monarch exec` off
	// (hostsconfig.Job.ExecOff, "job.toml:12"); "": it may run.
	ExecOff string
	// Dashboard is where the client serves the job's dashboard
	// (hostsconfig.Dashboard.Address: host:port, or "off"); "": the
	// default. DashboardAt is where that was said: the job file's line
	// ("job.toml:12"); "" for the environment (DashboardVar) or the
	// default.
	Dashboard, DashboardAt string

	// FileLog and StderrLog are the job's system log levels (read by
	// logagg.SystemLogger); a level the environment already sets wins
	// (see Environ).
	FileLog, StderrLog string

	// HostName names a simulated host (h0, h1, ...): the name its agent
	// and its procs give in log lines, instead of the machine's.
	HostName string
	// HostAddr is, for a proc, its host's address on the route to the
	// job's hub: where it serves what other hosts dial (a one-sided
	// buffer's TCP path), though its own bus link may be loopback.
	HostAddr string

	// HostBus marks a simulated host started as a proc (HostsFromConfig
	// run without a launcher): it runs its host's bus, as a host agent
	// does. Its own children do not inherit it.
	HostBus bool

	// Health is the hosts file's [health], for every process of the job
	// (children inherit it); nil: the defaults.
	Health *hostsconfig.Health
	// LinkWatcher is where a host agent holds its link to the job's
	// link watcher (host:port, see internal/hostlink).
	LinkWatcher string
	// LinkMunge, set, says a host agent got no token: it proves to the
	// link watcher with a MUNGE credential, made with the munged at this
	// socket ("-": munge's default), that it runs as the job's user, and
	// receives the token over the link (TLS).
	LinkMunge string
	// SealedEnv is, for a host agent, the variables of its procs (the
	// job file's [env], and the launcher's), sealed under the job's token
	// (SealEnv): the agent opens it once it holds the token. Over ssh it
	// comes on stdin, after the token, not in the environment.
	SealedEnv string

	// Proc is set for a proc by the host agent that starts it.
	Proc *Proc
}

// HealthOrDefault is e.Health, or the defaults when not set.
func (e Env) HealthOrDefault() hostsconfig.Health {
	if e.Health != nil {
		return *e.Health
	}
	return hostsconfig.DefaultHealth()
}

// Proc is a proc's bootstrap: who it is and where to say it is ready.
type Proc struct {
	ID        string
	Parent    string // the proc whose port waits for the ready report
	ReadyPort uint64
	ReadyRank int
	Agent     string // the host agent that started it
	// Spare: it is started idle, with no rank and nobody to report to,
	// until its agent hands it a slot (wire.OpTakeSlot); Parent and the
	// ready port are then unset.
	Spare bool
}

// RankVars tells a proc where it is in its mesh, for the program:
// MONARCH_RANK_<DIM> and MONARCH_SIZE_<DIM> for each dimension, with the
// proc's coordinate in each.
func RankVars(dims []hostsconfig.Dim, coords []int) []string {
	env := make([]string, 0, 2*len(dims))
	for i, d := range dims {
		name := dimVar(d.Name)
		env = append(env, prefixRank+name+"="+strconv.Itoa(coords[i]), prefixSize+name+"="+strconv.Itoa(d.Size))
	}
	return env
}

// Environ is e as NAME=value strings, for exec.Cmd.Env: the fields that
// are set. The log levels are left out where the current environment
// already sets them: there the user's choice wins, and the child inherits
// it.
func (e Env) Environ() []string {
	var env []string
	add := func(k, v string) {
		if v != "" {
			env = append(env, k+"="+v)
		}
	}
	add(varJob, e.Job)
	add(varBusURL, e.Bus.URL)
	add(varBusToken, e.Bus.Token)
	add(varTLSCA, e.Bus.TLSCA)
	add(varTLSName, e.Bus.TLSName)
	add(varBusLeaf, e.Bus.Leaf)
	if e.Bus.Hubs > 1 {
		add(varBusHubs, strconv.Itoa(e.Bus.Hubs))
	}
	add(varBusRoute, e.Bus.Route)
	add(varHubHosts, strings.Join(e.Bus.HubHosts, ","))
	add(varBusLocal, e.Bus.Local)
	if e.Bus.Secure {
		add(varBusSecure, "1")
	}
	if e.HostBus {
		add(varHostBus, "1")
	}
	if e.HostAgents > 0 {
		add(varHostAgents, strconv.Itoa(e.HostAgents))
	}
	add(varProcs, FormatDims(e.Procs))
	if e.LogStream != nil {
		add(varLogStream, strconv.FormatBool(*e.LogStream))
	}
	if e.LogWindow > 0 {
		add(varLogWindow, e.LogWindow.String())
	}
	add(HostsVar, e.HostsFile)
	add(varExecOff, e.ExecOff)
	add(DashboardVar, e.Dashboard)
	add(varDashAt, e.DashboardAt)
	if e.StopGrace > 0 {
		add(varStopGrace, e.StopGrace.String())
	}
	if !e.JobEnd.IsZero() {
		add(varJobEnd, strconv.FormatInt(e.JobEnd.Unix(), 10))
	}
	for k, v := range map[string]string{logagg.EnvFileLevel: e.FileLog, logagg.EnvStderrLevel: e.StderrLog} {
		if os.Getenv(k) == "" {
			add(k, v)
		}
	}
	add(varHostName, e.HostName)
	add(varHostAddr, e.HostAddr)
	if h := e.Health; h != nil {
		add(varHealth, fmt.Sprintf("heartbeat=%v,host_timeout=%v,link_timeout=%v,lost_after=%v", h.Heartbeat, h.HostTimeout, h.LinkTimeout, h.LostAfter))
	}
	add(varLinks, e.LinkWatcher)
	add(varLinkMunge, e.LinkMunge)
	add(varSealedEnv, e.SealedEnv)
	if p := e.Proc; p != nil {
		add(varProc, p.ID)
		if p.Spare {
			add(varSpare, "1")
		} else {
			add(varParent, p.Parent)
			add(varReadyPort, strconv.FormatUint(p.ReadyPort, 10))
			add(varReadyRank, strconv.Itoa(p.ReadyRank))
		}
		add(varAgent, p.Agent)
	}
	return env
}

// dimVar is a dimension's name as a variable suffix: upper case, '-' as '_'.
func dimVar(name string) string {
	return strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// BusURL is the job's bus URL from this process's environment, or "" when
// it has none (a client run directly, with a bus of its own).
func BusURL() string { return os.Getenv(varBusURL) }

// HostAddr is Env.HostAddr from this process's environment, or "".
func HostAddr() string {
	if v := os.Getenv(varHostAddr); validHostAddr(v) {
		return v
	}
	return ""
}

// validHostAddr: v can be a host's address or name.
func validHostAddr(v string) bool { return len(v) <= 255 && !strings.ContainsAny(v, " \t\r\n/") }

// BusTLS reports whether this process's job runs its bus with TLS: then
// whatever else its processes serve to each other should be encrypted too.
func BusTLS() bool {
	return os.Getenv(varTLSCA) != "" || os.Getenv(varTLSName) != "" || os.Getenv(varBusSecure) == "1"
}

// IsProc reports whether this process was started as a proc of a job.
func IsProc() bool { return os.Getenv(varProc) != "" }

// FromEnviron reads the contract from this process's environment. It
// fails, naming the variable, on a value it cannot read; a variable that
// is not set leaves its field zero.
func FromEnviron() (Env, error) { return fromLookup(os.Getenv) }

// FromList reads the contract from env, NAME=value strings as exec.Cmd.Env
// takes them (the last of a name wins, as there): what a proc started
// with env would read, for a proc that runs inside this process (an
// in-process cluster's, actorrt/actortest).
func FromList(env []string) (Env, error) {
	m := make(map[string]string, len(env))
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok {
			m[k] = v
		}
	}
	return fromLookup(func(k string) string { return m[k] })
}

func fromLookup(getenv func(string) string) (Env, error) {
	var e Env
	var errs []error
	bad := func(k, v, want string) { errs = append(errs, fmt.Errorf("$%s=%q: want %s", k, v, want)) }
	e.Job = getenv(varJob)
	e.Bus = Bus{URL: getenv(varBusURL), Token: getenv(varBusToken), TLSCA: getenv(varTLSCA), TLSName: getenv(varTLSName),
		Leaf: getenv(varBusLeaf), Route: getenv(varBusRoute), Local: getenv(varBusLocal), Secure: getenv(varBusSecure) == "1"}
	if v := e.Bus.Local; v != "" && !ValidHostKey(v) {
		bad(varBusLocal, v, "a host's key (letters, digits, '-' and '_')")
		e.Bus.Local = ""
	}
	if v := getenv(varBusHubs); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 2 {
			bad(varBusHubs, v, "a number of hub servers, 2 or more")
		}
		e.Bus.Hubs = n
	}
	if v := getenv(varHubHosts); v != "" {
		e.Bus.HubHosts = strings.Split(v, ",")
		if len(v) > 64<<10 || slices.Contains(e.Bus.HubHosts, "") || strings.ContainsAny(v, " \t\r\n") {
			bad(varHubHosts, v, "host names, comma-separated")
			e.Bus.HubHosts = nil
		}
	}
	e.HostBus = getenv(varHostBus) == "1"
	e.ExecOff = getenv(varExecOff)
	e.Dashboard, e.DashboardAt = getenv(DashboardVar), getenv(varDashAt)
	if v := e.Dashboard; v != "" && v != hostsconfig.DashboardOff {
		if err := hostsconfig.CheckDashboardAddress(v); err != nil {
			bad(DashboardVar, v, "an address host:port or "+hostsconfig.DashboardOff+" ("+err.Error()+")")
			e.Dashboard = ""
		}
	}
	if e.HostBus && e.Bus.Leaf == "" {
		errs = append(errs, fmt.Errorf("$%s needs $%s", varHostBus, varBusLeaf))
	}
	if v := getenv(varHostAgents); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			bad(varHostAgents, v, "a number of hosts")
		}
		e.HostAgents = n
	}
	if v := getenv(varProcs); v != "" {
		dims, err := ParseDims(v)
		if err != nil {
			bad(varProcs, v, "NAME=SIZE,... ("+err.Error()+")")
		}
		e.Procs = dims
	}
	if v := getenv(varLogStream); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			bad(varLogStream, v, "true or false")
		}
		e.LogStream = &b
	}
	if v := getenv(varLogWindow); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			bad(varLogWindow, v, "a duration")
		}
		e.LogWindow = d
	}
	e.HostsFile = getenv(HostsVar)
	if v := getenv(varStopGrace); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			bad(varStopGrace, v, "a duration over 0")
		}
		e.StopGrace = d
	}
	if v := getenv(varJobEnd); v != "" {
		sec, err := strconv.ParseInt(v, 10, 64)
		if err != nil || sec <= 0 {
			bad(varJobEnd, v, "Unix seconds")
		}
		e.JobEnd = time.Unix(sec, 0)
	}
	e.FileLog, e.StderrLog = getenv(logagg.EnvFileLevel), getenv(logagg.EnvStderrLevel)
	if v := getenv(varHostName); v != "" {
		if len(v) > 255 || strings.ContainsAny(v, " \t\r\n") {
			bad(varHostName, v, "a host name")
		} else {
			e.HostName = v
		}
	}
	if v := getenv(varHostAddr); v != "" {
		if !validHostAddr(v) {
			bad(varHostAddr, v, "an address or host name")
		} else {
			e.HostAddr = v
		}
	}
	if v := getenv(varHealth); v != "" {
		h, err := parseHealth(v)
		if err != nil {
			bad(varHealth, v, "heartbeat=D,host_timeout=D,link_timeout=D,lost_after=D ("+err.Error()+")")
		} else {
			e.Health = &h
		}
	}
	e.LinkWatcher = getenv(varLinks)
	e.LinkMunge = getenv(varLinkMunge)
	e.SealedEnv = getenv(varSealedEnv)
	if id := getenv(varProc); id != "" {
		p := &Proc{ID: id, Parent: getenv(varParent), Agent: getenv(varAgent)}
		switch v := getenv(varSpare); v {
		case "1":
			p.Spare = true
			if p.Parent != "" || getenv(varReadyPort) != "" || p.Agent == "" {
				errs = append(errs, fmt.Errorf("a spare ($%s=1) has $%s and no $%s or $%s", varSpare, varAgent, varParent, varReadyPort))
			}
		case "":
			port, err := strconv.ParseUint(getenv(varReadyPort), 10, 64)
			if err != nil || port == 0 {
				bad(varReadyPort, getenv(varReadyPort), "a port number")
			}
			rank, err := strconv.Atoi(getenv(varReadyRank))
			if err != nil || rank < 0 {
				bad(varReadyRank, getenv(varReadyRank), "a rank")
			}
			p.ReadyPort, p.ReadyRank = port, rank
			if p.Parent == "" {
				errs = append(errs, fmt.Errorf("$%s is not set", varParent))
			}
		default:
			bad(varSpare, v, "1 or unset")
		}
		if e.Job == "" || e.Bus.URL == "" {
			errs = append(errs, fmt.Errorf("a proc needs $%s and $%s", varJob, varBusURL))
		}
		e.Proc = p
	}
	if len(errs) > 0 {
		return Env{}, fmt.Errorf("jobenv: %w", errors.Join(errs...))
	}
	return e, nil
}

// Restarts is this process's RestartVar: how many times its job was
// started before; 0 when not set or not a count.
func Restarts() int {
	n, err := strconv.Atoi(os.Getenv(RestartVar))
	if err != nil || n < 0 {
		return 0
	}
	return n
}

// FeedOff reports whether this process's FeedVar turns the feed's
// counting off. It reads the environment: call it once, at start.
func FeedOff() bool {
	switch os.Getenv(FeedVar) {
	case "off", "0", "false":
		return true
	}
	return false
}

// UnsetSecret removes the job's secret, and a host agent's sealed [env],
// from this process's environment: once the runtime has read them, user
// code and its children do not inherit them.
func UnsetSecret() {
	os.Unsetenv(varBusToken)
	os.Unsetenv(varSealedEnv)
}

// Clean drops every variable of this contract from env, so that a process
// started from a process of one job gets only what its starter gives it.
// The torchrun variables need no cleaning: each proc's own come last, and
// the last value of a name wins.
func Clean(env []string) []string {
	out := env[:0:0]
	for _, kv := range env {
		if !isContractVar(kv) {
			out = append(out, kv)
		}
	}
	return out
}

func isContractVar(kv string) bool {
	k, _, _ := strings.Cut(kv, "=")
	switch k {
	case varJob, varBusURL, varBusToken, varTLSCA, varTLSName, varBusSecure, varHostAddr, varBusLeaf, varBusHubs, varBusRoute, varHostBus,
		varHostAgents, varProc, varParent, varReadyPort, varReadyRank, varAgent, varSpare, OutputVar, SPMDReportVar, varLinks, varLinkMunge, varSealedEnv, varExecOff,
		DashboardVar, varDashAt:
		return true
	}
	return strings.HasPrefix(k, prefixRank) || strings.HasPrefix(k, prefixSize)
}

// parseHealth reads MONARCH_HEALTH: every key once, in any order.
func parseHealth(v string) (hostsconfig.Health, error) {
	var h hostsconfig.Health
	fields := map[string]*time.Duration{"heartbeat": &h.Heartbeat, "host_timeout": &h.HostTimeout, "link_timeout": &h.LinkTimeout, "lost_after": &h.LostAfter}
	parts := strings.Split(v, ",")
	if len(parts) != len(fields) {
		return h, fmt.Errorf("%d keys, want %d", len(parts), len(fields))
	}
	for _, kv := range parts {
		k, d, _ := strings.Cut(kv, "=")
		dst := fields[k]
		if dst == nil || *dst != 0 {
			return h, fmt.Errorf("key %q unknown or given twice", k)
		}
		var err error
		if *dst, err = time.ParseDuration(d); err != nil || *dst <= 0 {
			return h, fmt.Errorf("%s: not a positive duration", k)
		}
	}
	return h, h.Check()
}

// FormatDims writes dims as the job file's [procs] travel: "gpus=4,x=2".
func FormatDims(dims []hostsconfig.Dim) string {
	parts := make([]string, len(dims))
	for i, d := range dims {
		parts[i] = d.Name + "=" + strconv.Itoa(d.Size)
	}
	return strings.Join(parts, ",")
}

// ParseDims reads what FormatDims writes.
func ParseDims(s string) ([]hostsconfig.Dim, error) {
	var dims []hostsconfig.Dim
	for _, part := range strings.Split(s, ",") {
		name, size, ok := strings.Cut(part, "=")
		n, err := strconv.Atoi(size)
		if !ok || name == "" || err != nil || n < 1 {
			return nil, fmt.Errorf("%q is not NAME=SIZE", part)
		}
		dims = append(dims, hostsconfig.Dim{Name: name, Size: n})
	}
	return dims, nil
}
