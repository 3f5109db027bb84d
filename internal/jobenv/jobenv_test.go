package jobenv

import (
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/monarch-go/monarch/hostsconfig"
)

// setEnv replaces the test's environment of contract variables with env.
func setEnv(t *testing.T, env []string) {
	for _, kv := range os.Environ() {
		if isContractVar(kv) || strings.HasPrefix(kv, "MONARCH_") {
			k, _, _ := strings.Cut(kv, "=")
			t.Setenv(k, "")
			os.Unsetenv(k)
		}
	}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
}

func TestRoundTrip(t *testing.T) {
	stream := false
	in := Env{
		Job: "j1", Bus: Bus{URL: "nats://127.0.0.1:4222", Token: "s3cret", TLSCA: "/ca.pem", TLSName: "h", Secure: true,
			Leaf: "nats-leaf://127.0.0.1:7422", Hubs: 3, Route: "nats-route://127.0.0.1:6222", HubHosts: []string{"node1", "node2"}},
		HostBus:    true,
		HostAgents: 3, Procs: []hostsconfig.Dim{{Name: "gpus", Size: 4}, {Name: "x", Size: 2}},
		LogStream: &stream, LogWindow: 3 * time.Second, HostsFile: "/hosts.toml", ExecOff: "job.toml:12",
		FileLog: "debug", StderrLog: "warn", HostName: "h2",
		Health:      &hostsconfig.Health{Heartbeat: 500 * time.Millisecond, HostTimeout: 7 * time.Second, LinkTimeout: 3 * time.Second, LostAfter: time.Minute},
		LinkWatcher: "10.0.0.1:4000", LinkMunge: "/run/munge/munge.socket.2",
		Proc: &Proc{ID: "c-1", Parent: "c", ReadyPort: 7, ReadyRank: 3, Agent: "h0"},
	}
	env := in.Environ()
	setEnv(t, env)
	out, err := FromEnviron()
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(out, in) {
		t.Errorf("round trip:\n got %+v %+v\nwant %+v %+v", out, out.Proc, in, in.Proc)
	}
	if !IsProc() {
		t.Error("IsProc is false with MONARCH_PROC set")
	}
	UnsetSecret()
	if _, ok := os.LookupEnv("MONARCH_BUS_TOKEN"); ok {
		t.Error("the secret is still in the environment")
	}
}

func TestFromEnvironErrors(t *testing.T) {
	tests := []struct {
		env  []string
		want string
	}{
		{[]string{"MONARCH_HOST_AGENTS=x"}, `$MONARCH_HOST_AGENTS="x": want a number of hosts`},
		{[]string{"MONARCH_HOST_AGENTS=0"}, `$MONARCH_HOST_AGENTS="0"`},
		{[]string{"MONARCH_PROCS=gpus"}, `$MONARCH_PROCS="gpus": want NAME=SIZE`},
		{[]string{"MONARCH_LOG_STREAM=maybe"}, `$MONARCH_LOG_STREAM="maybe": want true or false`},
		{[]string{"MONARCH_LOG_WINDOW=soon"}, `$MONARCH_LOG_WINDOW="soon": want a duration`},
		{[]string{"MONARCH_HOST_NAME=a b"}, `$MONARCH_HOST_NAME="a b": want a host name`},
		{[]string{"MONARCH_BUS_HUB_HOSTS=a,,b"}, `$MONARCH_BUS_HUB_HOSTS="a,,b": want host names`},
		{[]string{"MONARCH_PROC=p", "MONARCH_JOB=j", "MONARCH_BUS_URL=u", "MONARCH_PARENT=c", "MONARCH_READY_RANK=0"}, `$MONARCH_READY_PORT="": want a port number`},
		{[]string{"MONARCH_PROC=p", "MONARCH_READY_PORT=1", "MONARCH_READY_RANK=0", "MONARCH_PARENT=c"}, "a proc needs $MONARCH_JOB and $MONARCH_BUS_URL"},
		{[]string{"MONARCH_BUS_HUBS=1"}, `$MONARCH_BUS_HUBS="1": want a number of hub servers, 2 or more`},
		{[]string{"MONARCH_HOST_BUS=1"}, "$MONARCH_HOST_BUS needs $MONARCH_BUS_LEAF"},
		{[]string{"MONARCH_HEALTH=heartbeat=1s"}, "1 keys, want 4"},
		{[]string{"MONARCH_HEALTH=heartbeat=1s,heartbeat=1s,link_timeout=3s,lost_after=30s"}, `key "heartbeat" unknown or given twice`},
		{[]string{"MONARCH_HEALTH=heartbeat=1s,host_timeout=5s,link_timeout=3s,lost_after=2s"}, "lost_after: want more than host_timeout"},
		{[]string{"MONARCH_HEALTH=heartbeat=x,host_timeout=5s,link_timeout=3s,lost_after=30s"}, "heartbeat: not a positive duration"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			setEnv(t, tt.env)
			_, err := FromEnviron()
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("FromEnviron with %q: %v, want %s", tt.env, err, tt.want)
			}
		})
	}
}

func TestRankVars(t *testing.T) {
	got := RankVars([]hostsconfig.Dim{{Name: "hosts", Size: 2}, {Name: "my-gpus", Size: 4}}, []int{1, 3})
	want := []string{"MONARCH_RANK_HOSTS=1", "MONARCH_SIZE_HOSTS=2", "MONARCH_RANK_MY_GPUS=3", "MONARCH_SIZE_MY_GPUS=4"}
	if !slices.Equal(got, want) {
		t.Errorf("RankVars = %q, want %q", got, want)
	}
}

func TestClean(t *testing.T) {
	env := []string{"PATH=/bin", "MONARCH_JOB=j", "MONARCH_BUS_TOKEN=s", "MONARCH_PROC=p", "MONARCH_RANK_GPUS=1",
		"MONARCH_SIZE_GPUS=2", "MONARCH_HOST_AGENTS=2", "MONARCH_HOST_NAME=h1", "MONARCH_FILE_LOG=debug", "HOME=/root",
		"MONARCH_BUS_LEAF=l", "MONARCH_BUS_HUBS=2", "MONARCH_BUS_ROUTE=r", "MONARCH_HOST_BUS=1", "MONARCH_SEALED_ENV=x"}
	got := Clean(env)
	want := []string{"PATH=/bin", "MONARCH_HOST_NAME=h1", "MONARCH_FILE_LOG=debug", "HOME=/root"}
	if !slices.Equal(got, want) {
		t.Errorf("Clean = %q, want %q", got, want)
	}
}

func TestAgentArgs(t *testing.T) {
	in := AgentArgs{Job: "j", Index: 2, Program: "/bin/prog", Args: []string{"--x", "y"}, Dir: "/d", TokenStdin: true}
	argv := in.Argv("/usr/bin/monarch")
	if argv[0] != "/usr/bin/monarch" || argv[1] != "agent" {
		t.Fatalf("argv %q", argv)
	}
	out, err := ParseAgentArgs(argv[2:], nil)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(in, out) {
		t.Errorf("round trip:\n got %+v\nwant %+v", out, in)
	}
	slurm := AgentArgs{Job: "j", Slurm: true, Index: -1, Program: "p", Args: []string{}}
	out, err = ParseAgentArgs(slurm.Argv("m")[2:], nil)
	if err != nil || !reflect.DeepEqual(slurm, out) {
		t.Errorf("slurm round trip: %+v, %v", out, err)
	}
	for args, want := range map[string]string{
		"--program p":         "--job is required",
		"--job j":             "--program is required",
		"--job j --program p": "--index -1",
		"--job j --index x":   `invalid value "x" for flag -index`,
		"--job j --program p --index 0 --env A=1": "flag provided but not defined: -env",
	} {
		if _, err := ParseAgentArgs(strings.Fields(args), nil); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseAgentArgs(%s) = %v, want %s", args, err, want)
		}
	}
}

// TestAgentArgsProgramSum: the program's sum crosses the agent's command
// line; one that is not a sha256 is refused.
func TestAgentArgsProgramSum(t *testing.T) {
	sum := strings.Repeat("0f", 32)
	in := AgentArgs{Job: "j", Index: 0, Program: "/c/" + sum + "/prog", ProgramSum: sum, Args: []string{}}
	out, err := ParseAgentArgs(in.Argv("m")[2:], nil)
	if err != nil || !reflect.DeepEqual(in, out) {
		t.Errorf("round trip: %+v, %v; want %+v", out, err, in)
	}
	for _, bad := range []string{"0f", strings.Repeat("0F", 32), strings.Repeat("0g", 32), sum + "0"} {
		_, err := ParseAgentArgs([]string{"--job", "j", "--index", "0", "--program", "p", "--program-sha256", bad}, nil)
		if err == nil || !strings.Contains(err.Error(), "want 64 hex digits") {
			t.Errorf("--program-sha256 %s: %v", bad, err)
		}
	}
}

func TestAgentID(t *testing.T) {
	for s, want := range map[string]bool{"h0": true, "h12": true, "h": false, "h01": false, "h-1": false, "c-1": false, "x3": false} {
		if IsAgentID(s) != want {
			t.Errorf("IsAgentID(%q) = %v", s, !want)
		}
	}
	if AgentID(7) != "h7" {
		t.Error(AgentID(7))
	}
}

func TestSubjects(t *testing.T) {
	if id, ok := MeshOfKey(MeshKey("c.m1")); !ok || id != "c.m1" {
		t.Errorf("MeshOfKey(MeshKey(c.m1)) = %q, %v", id, ok)
	}
	if _, ok := MeshOfKey(ProcKey("c")); ok {
		t.Error("a proc's key taken for a mesh's")
	}
	s := SubjectsOf("j1")
	for got, want := range map[string]string{
		s.Proc("c"): "mon.j1.proc.c", s.Mesh("c.m1"): "mon.j1.mesh.c.m1", s.Deaths("h1"): "mon.j1.deaths.h1",
		s.Log(): "mon.j1.log", s.Up(): "mon.j1.up", s.Counts(): "mon.j1.counts", s.Agents(): "mon.j1.agents",
		s.Heartbeat("h1"): "mon.j1.hb.h1", s.AgentGone("h1"): "mon.j1.agentgone.h1",
	} {
		if got != want {
			t.Errorf("got %s, want %s", got, want)
		}
	}
}

// TestInbox: a proc under the key of the host whose bus delivers its
// procs subscribes under the host's local prefix; a message there is
// named by the subject it was sent to.
func TestInbox(t *testing.T) {
	s := SubjectsOf("j")
	for _, c := range []struct{ id, local, inbox string }{
		{"h3.c-5", "h3", "mon.j.local.h3.c-5"},
		{"h3.c-5-1", "h3", "mon.j.local.h3.c-5-1"},
		{"h3.c-5", "", "mon.j.proc.h3.c-5"},
		{"h3.c-5", "h4", "mon.j.proc.h3.c-5"},
		{"c-5", "h3", "mon.j.proc.c-5"},
		{"h3", "h3", "mon.j.proc.h3"},
	} {
		in := s.Inbox(c.id, c.local)
		if in != c.inbox {
			t.Errorf("Inbox(%q, %q) = %q, want %q", c.id, c.local, in, c.inbox)
		}
		if p := s.Public(in); p != s.Proc(c.id) {
			t.Errorf("Public(%q) = %q, want %q", in, p, s.Proc(c.id))
		}
		if k := s.Key(in); k != ProcKey(c.id) {
			t.Errorf("Key(%q) = %q, want %q", in, k, ProcKey(c.id))
		}
	}
	if p := s.Public("mon.k.local.h3.c-5"); p != "mon.k.local.h3.c-5" {
		t.Errorf("another job's subject mapped: %q", p)
	}
	if s.ProcsOf("h3") != "mon.j.proc.h3" || s.LocalOf("h3") != "mon.j.local.h3" {
		t.Errorf("ProcsOf, LocalOf: %q, %q", s.ProcsOf("h3"), s.LocalOf("h3"))
	}
	if HostKey("h3.c-5") != "h3" || HostKey("c-5") != "" || LocalPart("h3.c-5-1") != "c-5-1" || LocalPart("c-5") != "c-5" {
		t.Error("HostKey, LocalPart")
	}
	for _, k := range []string{"", "h.3", "h 3", "h>", "h*"} {
		if ValidHostKey(k) {
			t.Errorf("ValidHostKey(%q)", k)
		}
	}
}

// FuzzAgentArgsProgramSum: any --program-sha256 is taken back as it was
// written or refused, never a panic.
func FuzzAgentArgsProgramSum(f *testing.F) {
	for _, s := range []string{strings.Repeat("ab", 32), "", "0f", strings.Repeat("AB", 32), strings.Repeat("a", 65), "--", "-x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, sum string) {
		argv := []string{"--job", "j", "--index", "0", "--program", "p", "--program-sha256", sum}
		a, err := ParseAgentArgs(argv, nil)
		if err == nil && (a.ProgramSum != sum || len(sum) != 64) {
			t.Fatalf("%q taken as %q", sum, a.ProgramSum)
		}
	})
}
