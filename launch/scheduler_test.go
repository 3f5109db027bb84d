package launch

import (
	"context"
	"io"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/monarch-go/monarch/hostsconfig"
	"github.com/monarch-go/monarch/internal/jobenv"
)

const (
	secret    = "s3cret-token"
	envSecret = "env-s3cret-value" // a value of the job's [env]
)

// testSpec is the agent spec of a job with TLS and a log level, whose
// [env] holds a secret.
func testSpec(t *testing.T) *agentSpec {
	job := &hostsconfig.Job{Program: "/bin/prog", Args: []string{"--lr", "0.1"}, Dir: "/work", Env: []string{"API_KEY=" + envSecret}}
	sealed, err := jobenv.SealEnv(secret, procVars(job))
	if err != nil {
		t.Fatal(err)
	}
	return &agentSpec{
		args: agentArgs("j1", job), monarch: "/opt/monarch", stderr: io.Discard,
		env: jobenv.Env{Bus: jobenv.Bus{URL: "nats://10.0.0.1:4222", Token: secret, TLSCA: "/ca.pem", TLSName: "10.0.0.1"}, FileLog: "DEBUG",
			SealedEnv: sealed},
	}
}

// checkSealedEnv checks that sealed opens, with the job's token, to the
// job's [env] and the launcher's variables.
func checkSealedEnv(t *testing.T, sealed string) {
	t.Helper()
	env, err := jobenv.OpenEnv(secret, sealed)
	if err != nil || !slices.Contains(env, "API_KEY="+envSecret) || !slices.ContainsFunc(env, func(kv string) bool { return strings.HasPrefix(kv, jobenv.RestartVar+"=") }) {
		t.Errorf("the sealed [env] opens to %q (%v)", env, err)
	}
}

// vars is env's variables as Environ writes them.
func vars(env jobenv.Env) []string { return env.Environ() }

// checkAgentArgv checks that argv runs the job's agent (parsed back as
// the agent parses it) and holds no secret.
func checkAgentArgv(t *testing.T, argv []string, want jobenv.AgentArgs) {
	t.Helper()
	if line := strings.Join(argv, " "); strings.Contains(line, secret) || strings.Contains(line, envSecret) {
		t.Errorf("a secret is in argv: %q", argv)
	}
	i := slices.Index(argv, "/opt/monarch")
	if i < 0 || i+1 >= len(argv) || argv[i+1] != "agent" {
		t.Fatalf("argv runs no monarch agent: %q", argv)
	}
	got, err := jobenv.ParseAgentArgs(argv[i+2:], nil)
	if err != nil {
		t.Fatalf("the agent cannot parse %q: %v", argv[i+2:], err)
	}
	if !slices.Equal(got.Args, want.Args) || got.Job != want.Job || got.Index != want.Index || got.Slurm != want.Slurm ||
		got.TokenStdin != want.TokenStdin || got.Program != want.Program || got.Dir != want.Dir {
		t.Errorf("agent args %+v, want %+v", got, want)
	}
}

func TestLocalAgentCommand(t *testing.T) {
	// A variable of a job this launcher runs in is not passed on.
	for _, kv := range vars(jobenv.Env{Job: "outer", Proc: &jobenv.Proc{ID: "c-1", Parent: "c", ReadyPort: 1}}) {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	spec := testSpec(t)
	cmd := localAgent(spec, 1)
	want := spec.args
	want.Index = 1
	checkAgentArgv(t, cmd.Args, want)
	for _, kv := range vars(jobenv.Env{Bus: spec.env.Bus, HostName: "h1", SealedEnv: spec.env.SealedEnv}) {
		if !slices.Contains(cmd.Env, kv) {
			t.Errorf("the agent's environment lacks %s", kv)
		}
	}
	checkSealedEnv(t, spec.env.SealedEnv)
	for _, kv := range vars(jobenv.Env{Job: "outer", Proc: &jobenv.Proc{ID: "c-1", Parent: "c", ReadyPort: 1}}) {
		if slices.Contains(cmd.Env, kv) {
			t.Errorf("the agent's environment has %s, of the launcher's own job", kv)
		}
	}
}

func TestSrunStep(t *testing.T) {
	spec := testSpec(t)
	cmd := slurmScheduler{&hostsconfig.Slurm{SrunArgs: []string{"--gres=x"}}}.step(spec, 2)
	want := spec.args
	want.Slurm = true
	checkAgentArgv(t, cmd.Args, want)
	for _, arg := range []string{"--nodes=2", "--ntasks=2", "--ntasks-per-node=1", "--gres=x"} {
		if !slices.Contains(cmd.Args, arg) {
			t.Errorf("srun lacks %s: %q", arg, cmd.Args)
		}
	}
	for _, kv := range vars(spec.env) {
		if !slices.Contains(cmd.Env, kv) {
			t.Errorf("the step's environment lacks %s", kv)
		}
	}
	if slices.ContainsFunc(cmd.Env, func(kv string) bool { return strings.Contains(kv, envSecret) }) {
		t.Errorf("the step's environment holds the [env] value unsealed")
	}
	checkSealedEnv(t, spec.env.SealedEnv)
}

func TestSSHSession(t *testing.T) {
	spec := testSpec(t)
	cmd := sshScheduler{&hostsconfig.SSH{Hosts: []string{"a", "b"}, User: "me"}}.session(spec, "b", 1)
	remote := cmd.Args[len(cmd.Args)-1]
	for _, s := range []string{secret, envSecret, spec.env.SealedEnv} {
		if strings.Contains(strings.Join(cmd.Args, " "), s) || slices.ContainsFunc(cmd.Env, func(kv string) bool { return strings.Contains(kv, s) }) {
			t.Fatalf("a secret (%s) is in the ssh command: %q", s, cmd.Args)
		}
	}
	if cmd.Args[len(cmd.Args)-2] != "b" || !slices.Contains(cmd.Args, "me") {
		t.Errorf("ssh to the wrong place: %q", cmd.Args)
	}
	// The remote command sets the environment but for the secret, then
	// runs the agent, which reads the secret from stdin.
	noSecret := spec.env
	noSecret.Bus.Token, noSecret.SealedEnv = "", ""
	words := strings.Fields(remote)
	if words[0] != "env" {
		t.Fatalf("remote command %q", remote)
	}
	for _, kv := range vars(noSecret) {
		if !slices.Contains(words, shellQuote(kv)) {
			t.Errorf("remote command lacks %s: %q", kv, remote)
		}
	}
	want := spec.args
	want.Index, want.TokenStdin = 1, true
	checkAgentArgv(t, unquoteWords(t, words), want)
}

// unquoteWords undoes shellQuote on words that hold no blanks.
func unquoteWords(t *testing.T, words []string) []string {
	out := make([]string, len(words))
	for i, w := range words {
		if strings.HasPrefix(w, "'") {
			w = strings.ReplaceAll(strings.Trim(w, "'"), `'\''`, "'")
		}
		out[i] = w
	}
	return out
}

func TestShellQuote(t *testing.T) {
	for in, want := range map[string]string{
		"/bin/prog": "/bin/prog", "A=1": "A=1", "": "''", "a b": "'a b'", "it's": `'it'\''s'`, "$HOME": "'$HOME'",
	} {
		if got := shellQuote(in); got != want {
			t.Errorf("shellQuote(%q) = %s, want %s", in, got, want)
		}
		if out, err := exec.Command("sh", "-c", "printf %s "+shellQuote(in)).Output(); err != nil || string(out) != in {
			t.Errorf("sh reads %s as %q (%v), want %q", shellQuote(in), out, err, in)
		}
	}
}

func TestPrepare(t *testing.T) {
	ctx := context.Background()
	t.Setenv("SLURM_JOB_ID", "")
	t.Setenv("SLURM_JOB_NODELIST", "")
	prepare := func(h *hostsconfig.Hosts) *placement {
		t.Helper()
		k, err := kindOf(h)
		if err != nil {
			t.Fatal(err)
		}
		p, err := k.open(h).prepare(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	if p := prepare(nil); len(p.hosts) != 0 || p.remote || p.elsewhere != nil {
		t.Errorf("no hosts file: %+v", p)
	}
	local := &hostsconfig.Hosts{Scheduler: hostsconfig.SchedulerLocal, Local: &hostsconfig.Local{Hosts: 3}}
	if p := prepare(local); !slices.Equal(p.hosts, []string{"h0", "h1", "h2"}) || p.remote {
		t.Errorf("3 simulated hosts: %+v", p)
	}
	ssh := &hostsconfig.Hosts{Scheduler: hostsconfig.SchedulerSSH, SSH: &hostsconfig.SSH{Hosts: []string{"a", "b"}, Monarch: "/opt/monarch"}}
	if p := prepare(ssh); !slices.Equal(p.hosts, []string{"a", "b"}) || !p.remote || p.route == nil || p.monarch != "/opt/monarch" {
		t.Errorf("ssh: %+v", p)
	}
	slurm := &hostsconfig.Hosts{Scheduler: hostsconfig.SchedulerSlurm, Slurm: &hostsconfig.Slurm{Nodes: 2}}
	if p := prepare(slurm); p.elsewhere == nil || len(p.hosts) != 0 {
		t.Errorf("slurm outside an allocation: %+v, want it run under salloc", p)
	}
	t.Setenv("SLURM_JOB_ID", "77")
	t.Setenv("SLURM_JOB_NODELIST", "n[1-2]")
	if p := prepare(slurm); p.elsewhere != nil || !slices.Equal(p.hosts, []string{"n1", "n2"}) || !p.remote || p.route == nil {
		t.Errorf("slurm inside an allocation: %+v", p)
	}
	if sched, id := enclosingBatch(); sched != hostsconfig.SchedulerSlurm || id != "77" {
		t.Errorf("enclosingBatch = %s %s, want slurm 77", sched, id)
	}
}

// Every scheduler of the hosts file has its kind; --detach needs one with
// a queue.
func TestKinds(t *testing.T) {
	for _, name := range []string{hostsconfig.SchedulerSlurm, hostsconfig.SchedulerSSH, hostsconfig.SchedulerLocal} {
		if k, ok := kinds[name]; !ok || k.open == nil {
			t.Errorf("no scheduler %s", name)
		}
	}
	if kinds[hostsconfig.SchedulerSlurm].queue == nil {
		t.Error("slurm has no queue")
	}
}

// TestDefaultStopGrace: a job made up on the command line gets the job
// file's default stop grace, so the launcher waits as long as the client
// lets its program.
func TestDefaultStopGrace(t *testing.T) {
	cfg := RunConfig{Job: &hostsconfig.Job{}}
	cfg.defaults()
	if cfg.Job.StopGrace != hostsconfig.DefaultStopGrace {
		t.Errorf("stop grace %v, want %v", cfg.Job.StopGrace, hostsconfig.DefaultStopGrace)
	}
	cfg = RunConfig{Job: &hostsconfig.Job{StopGrace: time.Second}}
	cfg.defaults()
	if cfg.Job.StopGrace != time.Second {
		t.Errorf("stop grace %v, want the job's 1s", cfg.Job.StopGrace)
	}
}
