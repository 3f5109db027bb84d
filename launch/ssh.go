package launch

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/monarch-go/monarch/bus"
	"github.com/monarch-go/monarch/hostsconfig"
)

// ssh: one session per host, the agent started with its secret on stdin
// and the session held open: when the launcher closes stdin (or dies, or
// the link breaks) the agent sees EOF and exits, taking its procs along.
// Without a terminal, killing the ssh client alone would leave the remote
// process running.

func sshArgs(s *hostsconfig.SSH, host string) []string {
	args := []string{"-T", "-o", "BatchMode=yes"}
	timeout := s.ConnectTimeout
	if timeout <= 0 {
		timeout = hostsconfig.DefaultSSHConnectTimeout
	}
	args = append(args, "-o", "ConnectTimeout="+strconv.Itoa(int((timeout+time.Second-1)/time.Second)))
	if s.ConfigFile != "" {
		args = append(args, "-F", s.ConfigFile)
	}
	if s.IdentityFile != "" {
		args = append(args, "-i", s.IdentityFile)
	}
	if s.User != "" {
		args = append(args, "-l", s.User)
	}
	if s.Port != 0 {
		args = append(args, "-p", strconv.Itoa(s.Port))
	}
	for _, o := range s.Options {
		args = append(args, "-o", o)
	}
	return append(args, host)
}

// startSSH starts an agent on every host, at most Parallel session setups
// at a time.
func startSSH(cfg RunConfig, jobID, url, token string, dialEnv []string, up func() int, stderr io.Writer) (*agents, error) {
	s := cfg.Hosts.SSH
	a := &agents{n: len(s.Hosts), ended: make(chan agentEnd, len(s.Hosts))}
	parallel := s.Parallel
	if parallel < 1 {
		parallel = hostsconfig.DefaultSSHParallel
	}
	for i, host := range s.Hosts {
		// Bound the sessions being set up: wait while too many started
		// agents have not reported yet (or 10 s, in case one never does).
		for wait := time.Now().Add(10 * time.Second); i-up() >= parallel && time.Now().Before(wait); {
			time.Sleep(10 * time.Millisecond)
		}
		remote := append([]string{"env", bus.EnvURL + "=" + url}, dialEnv...)
		argv := agentCommand(cfg.Monarch, jobID, cfg.Job, strconv.Itoa(i))
		argv = append(argv[:2], append([]string{"--token-stdin"}, argv[2:]...)...)
		remote = append(remote, argv...)
		quoted := make([]string, len(remote))
		for j, w := range remote {
			quoted[j] = shellQuote(w)
		}
		cmd := exec.Command("ssh", append(sshArgs(s, host), strings.Join(quoted, " "))...)
		cmd.Stdout = os.Stdout
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
		stdin, err := cmd.StdinPipe()
		if err != nil {
			a.stop(time.Second)
			return nil, err
		}
		if err := a.start("ssh "+host, []string{"h" + strconv.Itoa(i)}, cmd, stderr); err != nil {
			a.stop(time.Second)
			return nil, err
		}
		a.mu.Lock()
		a.stdins = append(a.stdins, stdin)
		a.mu.Unlock()
		if _, err := io.WriteString(stdin, token+"\n"); err != nil {
			a.stop(time.Second)
			return nil, fmt.Errorf("ssh %s: send the job secret: %w", host, err)
		}
	}
	return a, nil
}

// sshHostAddr asks ssh what address it would connect to for host (its
// config may rename it).
func sshHostAddr(s *hostsconfig.SSH, host string) string {
	args := []string{"-G"}
	if s.ConfigFile != "" {
		args = append(args, "-F", s.ConfigFile)
	}
	for _, o := range s.Options {
		args = append(args, "-o", o)
	}
	out, err := exec.Command("ssh", append(args, host)...).Output()
	if err != nil {
		return host
	}
	for _, line := range strings.Split(string(out), "\n") {
		if a, ok := strings.CutPrefix(line, "hostname "); ok {
			return strings.TrimSpace(a)
		}
	}
	return host
}
