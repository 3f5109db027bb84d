package launch

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// The srun and ssh lines below are what they printed on the test cluster
// (Slurm 22.05, OpenSSH 9) for each failure.

func TestSrunCause(t *testing.T) {
	ctx := causeContext{hosts: []string{"h1", "h2"}, monarch: "/opt/nosuch/monarch", key: "[slurm] monarch", keySet: true}
	for _, tt := range []struct {
		name     string
		lines    []string
		host     string
		msg      string // the cause's message holds this
		noCause  bool
		keyUnset bool
	}{
		{name: "h2's link down", host: "h2", msg: "Slurm could not launch its agent: Communication connection failure", lines: []string{
			"srun: error: Task launch for StepId=9.0 failed on node h2: Communication connection failure",
			"srun: error: Application launch failed: Communication connection failure",
			"srun: Job step aborted: Waiting up to 7 seconds for job step to finish.",
			"slurmstepd-h1: error: *** STEP 9.0 ON h1 CANCELLED AT 2026-12-03T21:39:00 ***",
			"srun: error: h1: task 0: Killed",
			"srun: launch/slurm: _step_signal: Terminating StepId=9.0"}},
		{name: "no monarch on the nodes", host: "h1", msg: "cannot run monarch at /opt/nosuch/monarch on h1 (No such file or directory): [slurm] monarch sets", lines: []string{
			"srun: error: h1: task 0: Exited with exit code 2",
			"srun: launch/slurm: _step_signal: Terminating StepId=8.0",
			"slurmstepd-h1: error: execve(): /opt/nosuch/monarch: No such file or directory",
			"slurmstepd-h2: error: execve(): /opt/nosuch/monarch: No such file or directory",
			"srun: error: h2: task 1: Exited with exit code 2"}},
		{name: "no monarch, key not set", keyUnset: true, host: "h1", msg: "that is the launcher's own path, as [slurm] monarch is not set", lines: []string{
			"slurmstepd-h1: error: execve(): /opt/nosuch/monarch: No such file or directory"}},
		{name: "slurmstepd without its node", host: "h2", msg: "cannot run monarch at /opt/nosuch/monarch (No such", lines: []string{
			"slurmstepd: error: execve(): /opt/nosuch/monarch: No such file or directory",
			"srun: error: h2: task 1: Exited with exit code 2"}},
		{name: "an agent killed", host: "h2", msg: "its agent was killed (Killed)", lines: []string{
			"srun: error: h2: task 1: Killed",
			"srun: launch/slurm: _step_signal: Terminating StepId=10.0",
			"slurmstepd-h1: error: *** STEP 10.0 ON h1 CANCELLED AT 2026-12-03T21:39:08 ***",
			"srun: Force Terminated StepId=10.0"}},
		{name: "the agent's own error beats its exit", host: "h2", msg: "its agent said: leaf cannot reach its hub", lines: []string{
			"srun: error: h1: task 0: Exited with exit code 1",
			"monarch agent on h2: leaf cannot reach its hub at 10.0.0.1:4222: connection refused",
			"srun: error: h2: task 1: Exited with exit code 1"}},
		{name: "an older agent names its index", host: "h2", msg: "its agent said: boom", lines: []string{
			"monarch agent h1: boom"}},
		{name: "tasks aggregated", host: "h1", msg: "its agent exited with status 3", lines: []string{
			"srun: error: h1: tasks 0-1: Exited with exit code 3"}},
		{name: "time limit", host: "h1", msg: "Slurm cancelled the step: time limit", lines: []string{
			"slurmstepd-h1: error: *** STEP 5.0 ON h1 CANCELLED AT 2026-12-03T21:39:08 DUE TO TIME LIMIT ***",
			"srun: error: h1: task 0: Terminated"}},
		{name: "no step", msg: "Slurm would not start the agents' step: Requested node configuration is not available", lines: []string{
			"srun: error: Unable to create step for job 12: Requested node configuration is not available"}},
		{name: "node failure", host: "h2", msg: "node failure", lines: []string{
			"srun: error: h1: task 0: Killed", "srun: error: Node failure on h2"}},
		{name: "teardown only", noCause: true, lines: []string{
			"srun: forcing job termination",
			"srun: Job step aborted: Waiting up to 7 seconds for job step to finish.",
			"slurmstepd-h1: error: *** STEP 2.0 ON h1 CANCELLED AT 2026-12-03T21:51:48 ***"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := ctx
			c.keySet = !tt.keyUnset
			got, ok := firstCause(tt.lines, c.readSrun)
			if ok == tt.noCause {
				t.Fatalf("cause %+v, %v; want one: %v", got, ok, !tt.noCause)
			}
			if tt.noCause {
				return
			}
			if got.host != tt.host || !strings.Contains(got.msg, tt.msg) {
				t.Errorf("cause %q on %q, want %q on %q", got.msg, got.host, tt.msg, tt.host)
			}
		})
	}
}

func TestSSHCause(t *testing.T) {
	for _, tt := range []struct {
		name, session, line, msg string
	}{
		{"unreachable", "10.213.7.99", "ssh: connect to host 10.213.7.99 port 22: Connection timed out",
			"ssh cannot connect to 10.213.7.99 port 22: Connection timed out"},
		{"unknown name", "nosuch", "ssh: Could not resolve hostname nosuch: Name or service not known",
			"ssh cannot resolve the host's name: Name or service not known"},
		{"no monarch", "h2", "env: '/opt/nosuch/monarch': No such file or directory",
			"cannot run monarch at /opt/nosuch/monarch on h2 (No such file or directory): [ssh] monarch sets monarch's path on the hosts"},
		{"no monarch, curly quotes", "h2", "env: ‘/opt/nosuch/monarch’: No such file or directory",
			"cannot run monarch at /opt/nosuch/monarch on h2"},
		{"no monarch, bash", "h2", "bash: line 1: /opt/nosuch/monarch: No such file or directory",
			"cannot run monarch at /opt/nosuch/monarch on h2"},
		{"refused", "h1", "Permission denied (publickey).", "ssh: Permission denied (publickey)."},
		{"the agent", "h1", "monarch agent on h1: bus connection lost: EOF", "its agent said: bus connection lost: EOF"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := causeContext{hosts: []string{"h1", "h2"}, monarch: "/opt/nosuch/monarch", key: "[ssh] monarch", keySet: true, session: tt.session}
			lines := []string{"Warning: Permanently added 'h1' (ED25519) to the list of known hosts.", tt.line}
			got, ok := firstCause(lines, c.readSSH)
			if !ok || got.host != tt.session || !strings.Contains(got.msg, tt.msg) {
				t.Errorf("cause %+v, %v; want %q on %s", got, ok, tt.msg, tt.session)
			}
		})
	}
	c := causeContext{session: "h1"}
	if got, ok := firstCause([]string{"Warning: Permanently added 'h1' (ED25519) to the list of known hosts."}, c.readSSH); ok {
		t.Errorf("a warning read as a cause: %+v", got)
	}
}

func TestOwnLines(t *testing.T) {
	for _, l := range []string{"srun: error: h1: task 0: Killed", "slurmstepd-h1: error: *** STEP 2.0 ON h1 CANCELLED ***",
		"slurmstepd: error: execve(): x: No such file or directory", "srun: forcing job termination"} {
		if !srunOwn(l) {
			t.Errorf("srun's own line not told: %q", l)
		}
	}
	for _, l := range []string{"monarch agent on h1: boom", "21:51:48 WRN proc ended proc=c-1", "slurmstepd-h1 is a host", "panic: x"} {
		if srunOwn(l) {
			t.Errorf("an agent's line taken for srun's: %q", l)
		}
	}
	for _, l := range []string{"ssh: connect to host x port 22: Connection refused", "env: '/x': No such file or directory",
		"Warning: Permanently added 'h1' (ED25519) to the list of known hosts.", "Connection to h1 closed by remote host."} {
		if !sshOwn(l) {
			t.Errorf("ssh's own line not told: %q", l)
		}
	}
	if sshOwn("monarch agent on h1: boom") {
		t.Error("an agent's line taken for ssh's")
	}
}

func TestHostFirst(t *testing.T) {
	lines := []string{"srun: error: h1: task 0: Killed", "srun: error: Task launch for StepId=9.0 failed on node h2: x",
		"srun: error: h12: task 5: Killed", "slurmstepd-h2: error: y", "srun: z"}
	got := hostFirst(lines, "h2")
	want := []string{lines[1], lines[3], lines[0], lines[2], lines[4]}
	if !slices.Equal(got, want) {
		t.Errorf("hostFirst:\n%q\nwant\n%q", got, want)
	}
	if got := hostFirst(lines, ""); !slices.Equal(got, lines) {
		t.Errorf("no host: %q", got)
	}
}

func TestAgentEndMessage(t *testing.T) {
	e := agentEnd{what: "srun step", err: errors.New("exit status 233"), cause: "first failing host h2: Slurm could not launch its agent: x",
		lines: []string{"srun: error: Task launch for StepId=9.0 failed on node h2: x", "srun: error: h1: task 0: Killed"}, more: 3, log: "/tmp/u/monarch_j_launcher.log"}
	if s := e.String(); strings.Contains(s, "\n") || !strings.HasPrefix(s, "srun step exit status 233; first failing host h2: ") {
		t.Errorf("String %q: want one line naming the host", s)
	}
	said := e.said()
	want := "\n  srun said:\n    srun: error: Task launch for StepId=9.0 failed on node h2: x\n    srun: error: h1: task 0: Killed\n    (3 more lines: all are in /tmp/u/monarch_j_launcher.log)"
	if said != want {
		t.Errorf("said:\n%s\nwant:\n%s", said, want)
	}
	if (agentEnd{what: "ssh h1"}).said() != "" {
		t.Error("nothing said, yet said() says something")
	}
}
