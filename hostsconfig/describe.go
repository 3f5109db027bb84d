package hostsconfig

import (
	"fmt"
	"strconv"
	"strings"
)

// Describe and its helpers say in words what a launcher does with a
// configuration, so that `monarch config check` shows users the
// consequences of what they wrote (how many hosts, which commands,
// which defaults) before they spend an allocation finding out.

// maxListedHosts bounds the hosts Describe names; the rest are counted.
const maxListedHosts = 8

// Describe returns a few lines, without a final newline: how the hosts
// are obtained, how an agent is started on each, and where the job's bus
// listens. It reads only h, so it says what a launcher would do both
// inside and outside a Slurm allocation where that differs.
func (h *Hosts) Describe() string {
	var lines []string
	switch h.Scheduler {
	case SchedulerSlurm:
		lines = append(describeSlurm(h.Slurm), describeShip(h.Ship, h.Slurm != nil && h.Slurm.Monarch != "", "nodes", "sbcast"))
	case SchedulerSSH:
		lines = append(describeSSH(h.SSH), describeShip(h.Ship, h.SSH != nil && h.SSH.Monarch != "", "hosts", "the ssh session"))
	case SchedulerLocal:
		n := 1
		if h.Local != nil {
			n = h.Local.Hosts
		}
		lines = []string{fmt.Sprintf("scheduler local: %s on this machine", plural(n, "simulated host"))}
	default:
		lines = []string{fmt.Sprintf("scheduler %q: unknown", h.Scheduler)}
	}
	return strings.Join(append(lines, describeBus(h.Bus), describeTLS(h.Bus, h.Scheduler), describeHealth(h.Health)), "\n")
}

// describeHealth says when a host is suspected and when lost.
func describeHealth(h Health) string {
	if h == (Health{}) {
		h = DefaultHealth()
	}
	return fmt.Sprintf("health: a heartbeat every %v; a host silent %v is suspected, and lost once its link is down (at once if its agent ends, after %v unanswered if its host or the network is down) or after %v silent",
		h.Heartbeat, h.HostTimeout, h.LinkTimeout, h.LostAfter)
}

func describeSlurm(s *Slurm) []string {
	if s == nil {
		s = &Slurm{Immediate: DefaultSlurmImmediate}
	}
	var lines []string
	if s.Nodes > 0 {
		line := "scheduler slurm: " + plural(s.Nodes, "node")
		if s.Partition != "" {
			line += " in partition " + s.Partition
		}
		if s.Time != "" {
			line += ", time " + s.Time
		}
		if s.Account != "" {
			line += ", account " + s.Account
		}
		if s.GPUsPerNode > 0 {
			line += ", " + plural(s.GPUsPerNode, "GPU") + " per node"
		}
		lines = append(lines,
			line+" (salloc, or sbatch with --detach), then one srun step with one monarch agent per node",
			"  inside an allocation: one srun step over all of its nodes")
	} else {
		lines = append(lines,
			"scheduler slurm: all the nodes of the current allocation, one srun step with one monarch agent per node",
			"  outside an allocation: refused, as slurm.nodes is not set")
	}
	lines = append(lines, fmt.Sprintf("  srun and salloc wait at most %v for resources (--immediate)", s.Immediate))
	if len(s.SbatchArgs) > 0 {
		lines = append(lines, "  extra salloc and sbatch arguments: "+quoteArgs(s.SbatchArgs))
	}
	if len(s.SrunArgs) > 0 {
		lines = append(lines, "  extra srun arguments: "+quoteArgs(s.SrunArgs))
	}
	return append(lines, describeMonarch(s.Monarch, "nodes"))
}

func describeSSH(s *SSH) []string {
	if s == nil {
		s = &SSH{ConnectTimeout: DefaultSSHConnectTimeout, Parallel: DefaultSSHParallel}
	}
	line := fmt.Sprintf("scheduler ssh: %s (%s)", plural(len(s.Hosts), "host"), listHosts(s.Hosts))
	if s.User != "" {
		line += " as " + s.User
	}
	if s.Port != 0 {
		line += ", port " + strconv.Itoa(s.Port)
	}
	line += fmt.Sprintf(", up to %s at once; a monarch agent per host over ssh", plural(s.Parallel, "session"))
	opts := fmt.Sprintf("  each connection attempt bounded to %v", s.ConnectTimeout)
	if s.IdentityFile != "" {
		opts += ", identity file " + s.IdentityFile
	}
	if s.ConfigFile != "" {
		opts += ", ssh config " + s.ConfigFile
	}
	if len(s.Options) > 0 {
		opts += ", options " + strings.Join(s.Options, " ")
	}
	return []string{line, opts, describeMonarch(s.Monarch, "hosts")}
}

func describeMonarch(path, where string) string {
	if path == "" {
		return "  monarch binary on the " + where + ": the launcher's own path"
	}
	return "  monarch binary on the " + where + ": " + path
}

// describeShip says when the program and monarch are sent to the hosts
// (where), by what (how); monarchSet: the file names monarch's path on
// the hosts.
func describeShip(s Ship, monarchSet bool, where, how string) string {
	cache := s.Cache
	if cache == "" {
		cache = DefaultShipCache + " ($XDG_CACHE_HOME/monarch/bin if set)"
	}
	switch {
	case s.Send == SendNever:
		return "  program and monarch: run from their paths on the " + where + ", never sent"
	case s.Send == SendAlways:
		return fmt.Sprintf("  program and monarch: sent by %s to the %s unless cached there (by sha256), run from the cache %s", how, where, cache)
	case monarchSet:
		return fmt.Sprintf("  program: sent by %s to the %s that lack it (not cached, nor at its path in folders only you can write: copied from there), into the cache %s; monarch: the one at its path there", how, where, cache)
	}
	return fmt.Sprintf("  program and monarch: sent by %s to the %s that lack them (not cached, nor at their paths in folders only you can write: copied from there), into the cache %s", how, where, cache)
}

func describeBus(b Bus) string {
	line := "bus: listens on " + b.Listen
	if strings.HasSuffix(b.Listen, ":0") {
		line += " (any free port)"
	}
	if b.Advertise != "" {
		line += ", workers dial " + b.Advertise
	} else {
		line += ", workers dial an address of this host chosen at launch"
	}
	if b.Hubs > 1 {
		line += fmt.Sprintf(", a hub of %d servers (this host's and hosts 0..%d's)", b.Hubs, b.Hubs-2)
	}
	return line
}

// describeTLS says whether the job's bus runs TLS, and why.
func describeTLS(b Bus, sched string) string {
	remote := sched == SchedulerSlurm || sched == SchedulerSSH
	switch {
	case b.TLSCert != "":
		ca := "the system's CAs"
		if b.TLSCA != "" {
			ca = "CA " + b.TLSCA
		}
		return "tls: on, TLS 1.3 with your certificate " + b.TLSCert + " and key " + b.TLSKey + ", checked against " + ca
	case b.TLS == TLSOff && remote:
		return "tls: off (tls = false): the bus token and every message cross the network in the clear; unsafe off this host"
	case b.TLS == TLSOff:
		return "tls: off (tls = false)"
	case b.TLS == TLSOn || remote:
		why := "the hosts are not this machine"
		if b.TLS == TLSOn {
			why = "tls = true"
		}
		line := "tls: on (" + why + "), TLS 1.3 on every link to the hub with a CA made for the job; leaves and routes show its certificates"
		switch sched {
		case SchedulerSlurm:
			line += "; the agents get the token over their TLS link once MUNGE proves they run as you, not in srun's environment"
		case SchedulerSSH:
			line += "; the agents get the token over ssh"
		}
		return line
	}
	return "tls: off: every link is on this machine's loopback (tls = true turns it on)"
}

// Describe returns a few lines, without a final newline: the program and
// how it is run, then, indented, its hosts as Hosts.Describe says them.
func (j *Job) Describe() string {
	lines := []string{"program: " + j.Program}
	if j.SPMD != nil {
		lines = []string{"spmd: runs " + quoteArgs(j.SPMD.Command) + " on every proc; CUDA_VISIBLE_DEVICES from dimension " + j.SPMD.GPUsDim}
		switch n := j.SPMD.MaxRestarts; {
		case n == 1:
			lines[0] += "; a rank's failure restarts every rank once (max_restarts = 1)"
		case n > 1:
			lines[0] += fmt.Sprintf("; a rank's failure restarts every rank, up to %d times (max_restarts = %d)", n, n)
		}
		switch sp := j.SPMD; {
		case sp.MinHosts > 0 && sp.MinHosts < sp.MaxHosts:
			lines[0] += fmt.Sprintf("; on %d hosts, going on with those left when some are lost, down to %d (nnodes = \"%d:%d\")", sp.MaxHosts, sp.MinHosts, sp.MinHosts, sp.MaxHosts)
		case sp.MaxHosts > 0:
			lines[0] += fmt.Sprintf("; on %d hosts (nnodes = %d)", sp.MaxHosts, sp.MaxHosts)
		}
	}
	switch {
	case j.SPMD != nil:
	case len(j.Args) > 0:
		lines = append(lines, "args: "+quoteArgs(j.Args))
	default:
		lines = append(lines, "args: none")
	}
	lines = append(lines, "dir: "+j.Dir)
	if len(j.Env) > 0 {
		names := make([]string, len(j.Env))
		for i, kv := range j.Env {
			names[i], _, _ = strings.Cut(kv, "=")
		}
		lines = append(lines, "env: "+strings.Join(names, ", "))
	} else {
		lines = append(lines, "env: nothing added")
	}
	if len(j.Procs) > 0 {
		lines = append(lines, "procs per host: "+describeDims(j.Procs))
	} else {
		lines = append(lines, "procs per host: not given")
	}
	lines = append(lines, "log: "+describeLog(j.Log))
	switch {
	case j.Hosts == nil:
		lines = append(lines, "hosts: $MONARCH_HOSTS if set, else this machine as one host")
	case j.Hosts.Path == "":
		lines = append(lines, "hosts: the job file's [hosts] table")
	default:
		lines = append(lines, "hosts: "+j.Hosts.Path)
	}
	if j.Hosts != nil {
		for _, l := range strings.Split(j.Hosts.Describe(), "\n") {
			lines = append(lines, "  "+l)
		}
	}
	switch d := j.Dashboard; d.Address {
	case "":
	case DashboardOff:
		lines = append(lines, "dashboard: off ("+d.At+")")
	default:
		lines = append(lines, "dashboard: served on "+d.Address+", behind the job's token ("+d.At+")")
	}
	if j.Array != nil {
		lines = append(lines, "array: "+j.Array.describe())
	}
	return strings.Join(lines, "\n")
}

// describeDims writes dimensions the way meshes print their extents:
// {gpus: 4} or {b: 2, a: 3}.
func describeDims(dims []Dim) string {
	parts := make([]string, len(dims))
	for i, d := range dims {
		parts[i] = d.Name + ": " + strconv.Itoa(d.Size)
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

func describeLog(l Log) string {
	var parts []string
	if l.StreamToClient {
		parts = append(parts, "procs' output streamed to the client")
	} else {
		parts = append(parts, "procs' output not streamed to the client")
	}
	if l.AggregateWindow > 0 {
		parts = append(parts, fmt.Sprintf("similar lines aggregated over %v", l.AggregateWindow))
	} else {
		parts = append(parts, "no aggregation")
	}
	parts = append(parts, "file level "+l.FileLevel, "stderr level "+l.StderrLevel)
	return strings.Join(parts, ", ")
}

// listHosts names the first hosts and counts the rest.
func listHosts(hosts []string) string {
	if len(hosts) <= maxListedHosts {
		return strings.Join(hosts, ", ")
	}
	return strings.Join(hosts[:maxListedHosts], ", ") + fmt.Sprintf(" and %d more", len(hosts)-maxListedHosts)
}

// quoteArgs joins arguments with spaces, quoting those a reader could
// not otherwise tell apart.
func quoteArgs(args []string) string {
	out := make([]string, len(args))
	for i, a := range args {
		if a == "" || strings.ContainsAny(a, " \t\r\n\"'\\") {
			a = strconv.Quote(a)
		}
		out[i] = a
	}
	return strings.Join(out, " ")
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return strconv.Itoa(n) + " " + what + "s"
}
