package systest

import (
	"bufio"
	"encoding/hex"
	"fmt"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/monarch-go/monarch/internal/testcluster"
)

// The bus's topology on the test cluster, read from the kernel: which
// process holds which TCP connection (its /proc/PID/fd sockets, matched
// in /proc/PID/net/tcp, which is the process's own network namespace).

// tcpSock is one TCP socket of a process.
type tcpSock struct {
	local, remote netip.AddrPort
	listen        bool // else established
}

// sockets lists the listening and established IPv4 TCP sockets process
// pid holds.
func sockets(t *testing.T, pid int) []tcpSock {
	t.Helper()
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatal(err)
	}
	inodes := map[string]bool{}
	for _, fd := range fds {
		l, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name()))
		if ino, ok := strings.CutPrefix(l, "socket:["); err == nil && ok {
			inodes[strings.TrimSuffix(ino, "]")] = true
		}
	}
	var out []tcpSock
	for _, file := range []string{"tcp", "tcp6"} {
		f, err := os.Open(fmt.Sprintf("/proc/%d/net/%s", pid, file))
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		sc.Scan() // the header
		for sc.Scan() {
			fields := strings.Fields(sc.Text())
			if len(fields) < 10 || !inodes[fields[9]] || (fields[3] != "01" && fields[3] != "0A") {
				continue
			}
			out = append(out, tcpSock{local: hexAddr(t, fields[1]), remote: hexAddr(t, fields[2]), listen: fields[3] == "0A"})
		}
		f.Close()
	}
	return out
}

// hexAddr reads /proc/net/tcp's "0100007F:1F90" (tcp6's has 32 hex
// digits, four 32-bit words); an IPv4-mapped address is returned as IPv4.
func hexAddr(t *testing.T, s string) netip.AddrPort {
	ip, port, _ := strings.Cut(s, ":")
	b, err := hex.DecodeString(ip)
	p, err2 := strconv.ParseUint(port, 16, 16)
	if err != nil || err2 != nil || len(b) != 4 && len(b) != 16 {
		t.Fatalf("address %q in /proc/net/tcp", s)
	}
	for i := 0; i < len(b); i += 4 { // each word is little-endian
		b[i], b[i+1], b[i+2], b[i+3] = b[i+3], b[i+2], b[i+1], b[i]
	}
	addr, _ := netip.AddrFromSlice(b)
	return netip.AddrPortFrom(addr.Unmap(), uint16(p))
}

// environ reads variable name of process pid.
func environ(t *testing.T, pid int, name string) string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range strings.Split(string(b), "\x00") {
		if v, ok := strings.CutPrefix(kv, name+"="); ok {
			return v
		}
	}
	return ""
}

// portOf is the port of a bus URL.
func portOf(t *testing.T, s string) uint16 {
	u, err := url.Parse(s)
	p, err2 := strconv.Atoi(u.Port())
	if err != nil || err2 != nil {
		t.Fatalf("URL %q", s)
	}
	return uint16(p)
}

// listensOn reports whether socks listen on port.
func listensOn(socks []tcpSock, port uint16) bool {
	for _, s := range socks {
		if s.listen && s.local.Port() == port {
			return true
		}
	}
	return false
}

// heldTopology starts a held job on the two ssh hosts with two
// procs each and [bus] hubs = hubs, and checks who holds which link:
// every proc one connection, over loopback, to a server its host's agent
// runs; the launcher no proc and no agent as a client; each host's agent
// one link out (its leaf's, to the hub server it dialled first) or, for
// h1 with a hub of two, routes to the launcher and h2's leaf link in.
func heldTopology(t *testing.T, hubs int) {
	c := testcluster.Get(t)
	program := filepath.Join(build(t), "multihost")
	hosts := fmt.Sprintf("scheduler = \"ssh\"\n[ssh]\nhosts = [%q, %q]\nconfig_file = %q\n[bus]\nhubs = %d\n", c.Hosts[0], c.Hosts[1], c.SSHConfig, hubs)
	cmd, stderr, procs := startHeld(t, c, heldJob(t, hosts, "gpus = 2"))
	if len(procs) != 4 {
		t.Fatalf("procs %v; stderr:\n%s", procs, stderr)
	}
	var agents []int // by index
	for _, p := range ourProcs("monarch agent") {
		// The agent itself, not the ssh session holding it.
		if runs(t, p.Cmdline, filepath.Join(build(t), "monarch")) && strings.Contains(p.Cmdline, cachedAs(t, program)+" ") {
			if strings.Contains(p.Cmdline, "--index 1 ") {
				agents = append(agents, p.PID)
			} else {
				agents = append([]int{p.PID}, agents...)
			}
		}
	}
	if len(agents) != 2 {
		t.Fatalf("agents running: %v", agents)
	}
	clientPort := portOf(t, environ(t, agents[0], "MONARCH_BUS_URL"))
	// Each agent holds a link of its own to the launcher's link watcher
	// (internal/hostlink), which carries no messages: counted apart.
	watcherPort := portOf(t, "tcp://"+environ(t, agents[0], "MONARCH_LINK_WATCHER"))
	leafPort := portOf(t, environ(t, agents[0], "MONARCH_BUS_LEAF"))
	launcher := sockets(t, cmd.Process.Pid)
	if !listensOn(launcher, clientPort) || !listensOn(launcher, leafPort) {
		t.Fatalf("the launcher does not listen on the bus's ports %d and %d: %v", clientPort, leafPort, launcher)
	}
	// Who the launcher's hub holds, by the host they come from.
	fromHosts := map[uint16]int{}
	for _, s := range launcher {
		if !s.listen && !s.remote.Addr().IsLoopback() {
			fromHosts[s.local.Port()]++
		}
	}
	wantLeaves := 2
	if hubs == 2 {
		wantLeaves = 0 // h2's leaf dials h1's server first (index 1 mod 2)
	}
	if fromHosts[clientPort] != 0 || fromHosts[leafPort] != wantLeaves {
		t.Errorf("the launcher's hub holds %d client and %d leaf connections from the hosts, want 0 and %d", fromHosts[clientPort], fromHosts[leafPort], wantLeaves)
	}
	// Each agent's own connections: its link(s) to the rest of the bus.
	agentSocks := [][]tcpSock{sockets(t, agents[0]), sockets(t, agents[1])}
	links := func(i int) (out []string) {
		for _, s := range agentSocks[i] {
			if !s.listen && !s.remote.Addr().IsLoopback() && s.remote.Port() != watcherPort {
				out = append(out, s.remote.String())
			}
		}
		return out
	}
	for i := range agents {
		n := 0
		for _, s := range agentSocks[i] {
			if !s.listen && s.remote.Port() == watcherPort {
				n++
			}
		}
		if n != 1 || !listensOn(launcher, watcherPort) {
			t.Errorf("agent %d holds %d links to the launcher's link watcher (port %d), want 1", i, n, watcherPort)
		}
	}
	h1, h2 := c.Hosts[0], c.Hosts[1]
	switch hubs {
	case 1:
		for i := range agents {
			if l := links(i); len(l) != 1 || l[0] != fmt.Sprintf("%s:%d", addrOf(t, environ(t, agents[i], "MONARCH_BUS_LEAF")), leafPort) {
				t.Errorf("agent %d's links: %v, want one, to the launcher's leaf port %d", i, l, leafPort)
			}
		}
	case 2:
		launcherAddr := addrOf(t, environ(t, agents[0], "MONARCH_BUS_LEAF"))
		l2 := links(1)
		h1Addr, h2Addr := outsideAddr(agentSocks[0]), outsideAddr(agentSocks[1])
		if len(l2) != 1 || !strings.HasPrefix(l2[0], h1Addr+":") {
			t.Errorf("%s's agent links to %v, want one link, to %s's hub server at %s", h2, l2, h1, h1Addr)
		}
		toLauncher, fromH2, other := 0, 0, 0
		for _, s := range agentSocks[0] {
			switch {
			case s.listen || s.remote.Addr().IsLoopback() || s.remote.Port() == watcherPort:
			case s.remote.Addr().String() == launcherAddr:
				toLauncher++
			case s.remote.Addr().String() == h2Addr:
				fromH2++
			default:
				other++
			}
		}
		if toLauncher == 0 || fromH2 != 1 || other != 0 {
			t.Errorf("%s's agent (a hub server) holds %d routes with the launcher, %d links from %s, %d others; want 1 or more, 1, 0: %v",
				h1, toLauncher, fromH2, h2, other, agentSocks[0])
		}
	}
	// Every proc holds one connection, over loopback, to a port its own
	// agent listens on; the two procs of a host to the same one.
	byHost := map[string]uint16{}
	for _, p := range procs {
		host, pidText, _ := strings.Cut(p, "/")
		pid, _ := strconv.Atoi(pidText)
		var conns []tcpSock
		for _, s := range sockets(t, pid) {
			if !s.listen {
				conns = append(conns, s)
			}
		}
		i := 0
		if host == h2 {
			i = 1
		}
		if len(conns) != 1 || !conns[0].remote.Addr().IsLoopback() || !listensOn(agentSocks[i], conns[0].remote.Port()) {
			t.Errorf("proc %s holds %v, want one loopback connection to its agent's server (which listens on %v)", p, conns, agentSocks[i])
			continue
		}
		if port, ok := byHost[host]; ok && port != conns[0].remote.Port() {
			t.Errorf("the procs of %s dial ports %d and %d", host, port, conns[0].remote.Port())
		}
		byHost[host] = conns[0].remote.Port()
	}
	t.Logf("hub of %d: the launcher holds %d leaf links; procs by host on %v", hubs, fromHosts[leafPort], byHost)
}

// addrOf is the host of a URL.
func addrOf(t *testing.T, s string) string {
	u, err := url.Parse(s)
	if err != nil {
		t.Fatalf("URL %q", s)
	}
	return u.Hostname()
}

// outsideAddr is the address a process's connections off its host
// leave from ("" if it holds none).
func outsideAddr(socks []tcpSock) string {
	for _, s := range socks {
		if !s.listen && !s.local.Addr().IsLoopback() {
			return s.local.Addr().String()
		}
	}
	return ""
}

// TestClusterTopology: on two real hosts, each host's procs dial a leaf
// their agent runs, and the launcher's hub holds one leaf link a host
// and no proc.
func TestClusterTopology(t *testing.T) { heldTopology(t, 1) }

// TestClusterHubOfTwo: with [bus] hubs = 2 the first host's agent runs
// the hub's second server, routed to the launcher's, its procs on it; the
// second host's leaf links to it.
func TestClusterHubOfTwo(t *testing.T) { heldTopology(t, 2) }
