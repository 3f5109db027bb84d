package hostsconfig

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/BurntSushi/toml"
)

var update = flag.Bool("update", false, "rewrite the # want: lines of testdata/bad/*.toml with the errors the files give, and the seeds of testdata/fuzz/FuzzDecode")

// TestBadFiles loads every file under testdata/bad and compares the error
// with the file's leading "# want: " lines, one line of the error each,
// in order. The name picks the loader: hosts-* LoadHosts, job-* LoadJob,
// load-* Load. "$DIR" in a want line stands for testdata/bad's absolute
// path. Adding a case is adding a file; -update rewrites the want lines
// from what the files give (review the diff).
func TestBadFiles(t *testing.T) {
	files, err := filepath.Glob("testdata/bad/*.toml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no testdata/bad/*.toml: %v", err)
	}
	// From inside the directory errors name the files as users who run
	// `monarch config check x.toml` there see them.
	t.Chdir("testdata/bad")
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		name := filepath.Base(f)
		t.Run(strings.TrimSuffix(name, ".toml"), func(t *testing.T) {
			data, err := os.ReadFile(name)
			if err != nil {
				t.Fatal(err)
			}
			want, body := splitWant(string(data))
			err = loadByName(name)
			if err == nil {
				t.Fatalf("loaded without error; want\n%s", strings.Join(want, "\n"))
			}
			var ce *ConfigError
			if !errors.As(err, &ce) {
				t.Errorf("error is a %T, not a *ConfigError", err)
			}
			got := strings.Split(strings.ReplaceAll(err.Error(), dir, "$DIR"), "\n")
			if *update {
				var b strings.Builder
				for _, g := range got {
					b.WriteString("# want: " + g + "\n")
				}
				if err := os.WriteFile(name, []byte(b.String()+body), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			if len(want) == 0 {
				t.Fatalf("%s has no # want: line (run with -update to add them)", name)
			}
			if !slices.Equal(got, want) {
				t.Errorf("error:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
		})
	}
}

// splitWant returns the leading "# want: " lines of a file and the rest.
func splitWant(s string) (want []string, body string) {
	for {
		line, rest, _ := strings.Cut(s, "\n")
		w, ok := strings.CutPrefix(line, "# want: ")
		if !ok {
			return want, s
		}
		want, s = append(want, w), rest
	}
}

func loadByName(name string) error {
	var err error
	switch {
	case strings.HasPrefix(name, "hosts-"):
		_, err = LoadHosts(name)
	case strings.HasPrefix(name, "job-"):
		_, err = LoadJob(name)
	case strings.HasPrefix(name, "load-"):
		_, err = Load(name)
	default:
		err = fmt.Errorf("%s: name a case hosts-*, job-* or load-*", name)
	}
	return err
}

// TestGoodFiles loads each file under testdata/good with Load and checks
// every value, defaults included.
func TestGoodFiles(t *testing.T) {
	dir, err := filepath.Abs("testdata/good")
	if err != nil {
		t.Fatal(err)
	}
	abs := func(name string) string { return filepath.Join(dir, name) }
	tlsFile := func(name string) string { return filepath.Join(dir, "..", "bad", "tls", name) }
	home := t.TempDir()
	key := filepath.Join(home, ".ssh", "id_test")
	if err := os.MkdirAll(filepath.Dir(key), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(key, []byte("key\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("HOME", home)
	remoteBus := Bus{Listen: "0.0.0.0:0", Hubs: 1}
	localBus := Bus{Listen: "127.0.0.1:0", Advertise: "127.0.0.1", Hubs: 1}
	jobLog := Log{StreamToClient: true, FileLevel: "INFO", StderrLevel: "WARN"}
	dh := DefaultHealth()
	tests := []struct {
		file string
		want any
	}{
		{"slurm-defaults.toml", &Hosts{Health: dh, Path: abs("slurm-defaults.toml"), Scheduler: SchedulerSlurm,
			Slurm: &Slurm{Immediate: 30 * time.Second, SignalBefore: 2 * time.Minute}, Bus: remoteBus}},
		{"slurm-full.toml", &Hosts{Health: dh, Path: abs("slurm-full.toml"), Scheduler: SchedulerSlurm,
			Slurm: &Slurm{Nodes: 2, GPUsPerNode: 4, Partition: "debug", Time: "1-12:30", Account: "proj",
				SbatchArgs: []string{"--qos=high", "--exclusive"}, SrunArgs: []string{"--mpi=none"},
				Immediate: time.Minute, Monarch: "/opt/monarch/bin/monarch", SignalBefore: 10 * time.Minute, Requeue: true},
			Bus: Bus{Listen: "10.0.0.5:4222", Advertise: "head.cluster:4222", Hubs: 2}}},
		{"ssh.toml", &Hosts{Health: dh, Path: abs("ssh.toml"), Scheduler: SchedulerSSH,
			SSH: &SSH{Hosts: []string{"h1", "h2"}, User: "root", Port: 22, Options: []string{"StrictHostKeyChecking=no"},
				ConnectTimeout: 5 * time.Second, Parallel: 16},
			Bus: Bus{Listen: "0.0.0.0:0", Advertise: "10.213.7.1", Hubs: 1}}},
		{"ssh-dotted.toml", &Hosts{Health: dh, Path: abs("ssh-dotted.toml"), Scheduler: SchedulerSSH,
			SSH: &SSH{Hosts: []string{"h1", "h2"}, Port: 2222, ConnectTimeout: 10 * time.Second, Parallel: 32},
			Bus: Bus{Listen: "0.0.0.0:4222", Advertise: "10.0.0.1", Hubs: 1}}},
		{"ssh-files.toml", &Hosts{Health: dh, Path: abs("ssh-files.toml"), Scheduler: SchedulerSSH,
			SSH: &SSH{Hosts: []string{"h1"}, IdentityFile: key, ConfigFile: abs("ssh.toml"),
				ConnectTimeout: 10 * time.Second, Parallel: 32},
			Bus: Bus{Listen: "0.0.0.0:0", TLSCert: tlsFile("cert.pem"), TLSKey: tlsFile("key.pem"), TLSCA: tlsFile("ca.pem"), Hubs: 1}}},
		{"local.toml", &Hosts{Health: dh, Path: abs("local.toml"), Scheduler: SchedulerLocal, Local: &Local{Hosts: 3}, Bus: localBus}},
		{"local-defaults.toml", &Hosts{Health: dh, Path: abs("local-defaults.toml"), Scheduler: SchedulerLocal, Local: &Local{Hosts: 1}, Bus: localBus}},
		{"local-direct.toml", &Hosts{Health: dh, Path: abs("local-direct.toml"), Scheduler: SchedulerLocal, Local: &Local{Hosts: 2},
			Bus: Bus{Listen: "127.0.0.1:0", Advertise: "127.0.0.1", Hubs: 1, Direct: true}}},
		{"local-health.toml", &Hosts{Path: abs("local-health.toml"), Scheduler: SchedulerLocal, Local: &Local{Hosts: 1}, Bus: localBus,
			Health: Health{Heartbeat: 500 * time.Millisecond, HostTimeout: 10 * time.Second, LinkTimeout: 4 * time.Second, LostAfter: 2 * time.Minute}}},
		{"job-minimal.toml", &Job{Path: abs("job-minimal.toml"), Program: "/bin/sh", Dir: dir, Log: jobLog, StopGrace: time.Minute}},
		{"job-exec-off.toml", &Job{Path: abs("job-exec-off.toml"), Program: "/bin/sh", Dir: dir, Log: jobLog, StopGrace: time.Minute,
			ExecOff: "testdata/good/job-exec-off.toml:5"}},
		{"job-feed-off.toml", &Job{Path: abs("job-feed-off.toml"), Program: "/bin/sh", Dir: dir, Log: jobLog, StopGrace: time.Minute,
			FeedOff: "testdata/good/job-feed-off.toml:5"}},
		{"job-dashboard.toml", &Job{Path: abs("job-dashboard.toml"), Program: "/bin/sh", Dir: dir, Log: jobLog, StopGrace: time.Minute,
			Dashboard: Dashboard{Address: "0.0.0.0:8080", At: "testdata/good/job-dashboard.toml:5"}}},
		{"job-dashboard-off.toml", &Job{Path: abs("job-dashboard-off.toml"), Program: "/bin/sh", Dir: dir, Log: jobLog, StopGrace: time.Minute,
			Dashboard: Dashboard{Address: DashboardOff, At: "testdata/good/job-dashboard-off.toml:4"}}},
		{"job-full.toml", &Job{Path: abs("job-full.toml"), Program: "/bin/sh", Args: []string{"-c", "echo hello"}, Dir: dir,
			Env:   []string{"OMP_NUM_THREADS=1", "B_FIRST=x", "A_SECOND=y=z"},
			Hosts: &Hosts{Health: dh, Path: abs("local.toml"), Scheduler: SchedulerLocal, Local: &Local{Hosts: 3}, Bus: localBus},
			Procs: []Dim{{"b", 2}, {"a", 3}},
			Log:   Log{AggregateWindow: 3 * time.Second, FileLevel: "DEBUG", StderrLevel: "ERROR"}, StopGrace: 5 * time.Second}},
		{"job-inline-hosts.toml", &Job{Path: abs("job-inline-hosts.toml"), Program: "/bin/sh", Dir: dir,
			Env:   []string{"Z=last letter, first key", "A=first letter, second key"},
			Hosts: &Hosts{Health: dh, Scheduler: SchedulerSlurm, Slurm: &Slurm{Nodes: 4, Partition: "gpu", Immediate: 30 * time.Second, SignalBefore: 2 * time.Minute}, Bus: remoteBus},
			Procs: []Dim{{"gpus", 8}},
			Log:   Log{StreamToClient: true, FileLevel: "TRACE", StderrLevel: "WARN"}, StopGrace: time.Minute}},
	}
	for _, tt := range tests {
		t.Run(strings.TrimSuffix(tt.file, ".toml"), func(t *testing.T) {
			got, err := Load(filepath.Join("testdata/good", tt.file))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got\n%s\nwant\n%s", asJSON(got), asJSON(tt.want))
			}
		})
	}
}

func asJSON(v any) string {
	b, _ := json.MarshalIndent(v, "", "  ")
	return string(b)
}

// TestProcsOrder: the dimensions keep the file's order, not the
// alphabet's (TOML tables are unordered maps to the library).
func TestProcsOrder(t *testing.T) {
	j, err := LoadJob("testdata/good/job-full.toml")
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(j.Procs); got != "[{b 2} {a 3}]" {
		t.Errorf("procs %s, want [{b 2} {a 3}]", got)
	}
}

// TestLoaderKinds: each loader refuses the other kind of file, saying
// what it is and the key that gives it away.
func TestLoaderKinds(t *testing.T) {
	tests := []struct {
		name string
		load func(string) error
		file string
		want string
	}{
		{"hosts loader, job file", func(p string) error { _, err := LoadHosts(p); return err },
			"testdata/good/job-minimal.toml",
			"testdata/good/job-minimal.toml: this is a job file (it sets program), not a MONARCH_HOSTS file: run it with monarch run testdata/good/job-minimal.toml"},
		{"job loader, hosts file", func(p string) error { _, err := LoadJob(p); return err },
			"testdata/good/local.toml",
			`testdata/good/local.toml: this is a MONARCH_HOSTS file (it sets scheduler), not a job file: a job file names it with hosts = "testdata/good/local.toml"`},
		{"no such file", func(p string) error { _, err := Load(p); return err },
			"testdata/nothere.toml", "testdata/nothere.toml: no such file or directory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.load(tt.file)
			if err == nil || err.Error() != tt.want {
				t.Errorf("error %v\nwant %s", err, tt.want)
			}
		})
	}
}

// TestRepoExamples loads the documented examples of the repository's
// testdata/. job.toml names ../bin/getting_started, which exists only
// after `make build`: the test loads a copy beside a stand-in program
// with the same relative layout, and checks that the file in place has
// no problem other than that program.
func TestRepoExamples(t *testing.T) {
	repo, err := filepath.Abs("../testdata")
	if err != nil {
		t.Fatal(err)
	}

	t.Run("hosts-slurm", func(t *testing.T) {
		h, err := LoadHosts("../testdata/hosts-slurm.toml")
		if err != nil {
			t.Fatal(err)
		}
		want := &Hosts{Health: DefaultHealth(), Path: filepath.Join(repo, "hosts-slurm.toml"), Scheduler: SchedulerSlurm,
			Slurm: &Slurm{Nodes: 2, GPUsPerNode: 4, Partition: "debug", Time: "01:00:00", Account: "proj",
				SbatchArgs: []string{"--qos=high"}, SrunArgs: []string{"--mpi=none"}, Immediate: 30 * time.Second,
				Monarch: "/opt/monarch/bin/monarch", SignalBefore: 5 * time.Minute, Requeue: true},
			Bus: Bus{Listen: "0.0.0.0:0", Advertise: "10.213.7.1", Hubs: 1}}
		if !reflect.DeepEqual(h, want) {
			t.Errorf("got\n%s\nwant\n%s", asJSON(h), asJSON(want))
		}
	})
	t.Run("hosts-ssh", func(t *testing.T) {
		h, err := LoadHosts("../testdata/hosts-ssh.toml")
		if err != nil {
			t.Fatal(err)
		}
		want := &Hosts{Health: DefaultHealth(), Path: filepath.Join(repo, "hosts-ssh.toml"), Scheduler: SchedulerSSH,
			SSH: &SSH{Hosts: []string{"h1", "h2"}, User: "root", Port: 22,
				Options: []string{"StrictHostKeyChecking=accept-new"}, ConnectTimeout: 5 * time.Second, Parallel: 16,
				Monarch: "/opt/monarch/bin/monarch"},
			Bus: Bus{Listen: "0.0.0.0:0", Advertise: "10.213.7.1", Hubs: 1}}
		if !reflect.DeepEqual(h, want) {
			t.Errorf("got\n%s\nwant\n%s", asJSON(h), asJSON(want))
		}
	})
	t.Run("hosts-local", func(t *testing.T) {
		h, err := LoadHosts("../testdata/hosts-local.toml")
		if err != nil {
			t.Fatal(err)
		}
		want := &Hosts{Health: DefaultHealth(), Path: filepath.Join(repo, "hosts-local.toml"), Scheduler: SchedulerLocal, Local: &Local{Hosts: 2},
			Bus: Bus{Listen: "127.0.0.1:0", Advertise: "127.0.0.1", Hubs: 1}}
		if !reflect.DeepEqual(h, want) {
			t.Errorf("got\n%s\nwant\n%s", asJSON(h), asJSON(want))
		}
	})
	t.Run("job", func(t *testing.T) {
		root := t.TempDir()
		for _, name := range []string{"job.toml", "hosts-local.toml"} {
			copyFile(t, filepath.Join("../testdata", name), filepath.Join(root, "testdata", name))
		}
		prog := filepath.Join(root, "bin", "getting_started")
		if err := os.MkdirAll(filepath.Dir(prog), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(prog, []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		j, err := LoadJob(filepath.Join(root, "testdata", "job.toml"))
		if err != nil {
			t.Fatal(err)
		}
		dir := filepath.Join(root, "testdata")
		want := &Job{Path: filepath.Join(dir, "job.toml"), Program: prog, Args: []string{}, Dir: dir,
			Env:       []string{"OMP_NUM_THREADS=1", "NCCL_DEBUG=WARN"},
			Hosts:     &Hosts{Health: DefaultHealth(), Path: filepath.Join(dir, "hosts-local.toml"), Scheduler: SchedulerLocal, Local: &Local{Hosts: 2}, Bus: Bus{Listen: "127.0.0.1:0", Advertise: "127.0.0.1", Hubs: 1}},
			Procs:     []Dim{{"gpus", 4}},
			Log:       Log{StreamToClient: true, AggregateWindow: 3 * time.Second, FileLevel: "INFO", StderrLevel: "WARN"},
			StopGrace: 90 * time.Second}
		if !reflect.DeepEqual(j, want) {
			t.Errorf("got\n%s\nwant\n%s", asJSON(j), asJSON(want))
		}
	})
	t.Run("job in place", func(t *testing.T) {
		_, err := LoadJob("../testdata/job.toml")
		if err == nil {
			return // bin/getting_started is built
		}
		var ce *ConfigError
		if !errors.As(err, &ce) || ce.Key != "program" || strings.Contains(err.Error(), "\n") {
			t.Errorf("the only problem of testdata/job.toml may be its program not being built yet; got:\n%v", err)
		}
	})
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	data, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestConfigErrorFormat(t *testing.T) {
	tests := []struct {
		name string
		err  ConfigError
		want string
	}{
		{"all", ConfigError{"hosts.toml", 7, "slurm.nodez", "unknown key"}, "hosts.toml:7: slurm.nodez: unknown key"},
		{"no line", ConfigError{"job.toml", 0, "program", "required key missing"}, "job.toml: program: required key missing"},
		{"no key", ConfigError{"hosts.toml", 5, "", `[ssh] given but scheduler is "slurm"`}, `hosts.toml:5: [ssh] given but scheduler is "slurm"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.err.Error(); got != tt.want {
				t.Errorf("%q, want %q", got, tt.want)
			}
		})
	}
}

// TestErrorsAs: a file with several problems still gives a *ConfigError
// to errors.As, the first in file order.
func TestErrorsAs(t *testing.T) {
	_, err := LoadHosts("testdata/bad/hosts-many.toml")
	var ce *ConfigError
	if !errors.As(err, &ce) {
		t.Fatalf("%T is not a *ConfigError", err)
	}
	if ce.Line != 6 || ce.Key != "slurm.nodes" {
		t.Errorf("first error %q, want line 6 and key slurm.nodes", ce)
	}
}

func TestParseLevel(t *testing.T) {
	tests := []struct{ in, want, err string }{
		{"INFO", "INFO", ""},
		{"debug", "DEBUG", ""},
		{" Warn ", "WARN", ""},
		{"warning", "", `unknown level "warning": want one of TRACE, DEBUG, INFO, WARN, ERROR`},
		{"", "", `unknown level "": want one of TRACE, DEBUG, INFO, WARN, ERROR`},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseLevel(tt.in)
			msg := ""
			if err != nil {
				msg = err.Error()
			}
			if got != tt.want || msg != tt.err {
				t.Errorf("ParseLevel(%q) = %q, %v; want %q, %q", tt.in, got, err, tt.want, tt.err)
			}
		})
	}
}

func TestSlurmTime(t *testing.T) {
	tests := []struct {
		in string
		ok bool
	}{
		{"30", true}, {"90", true}, {"30:15", true}, {"01:00:00", true}, {"100:00:00", true},
		{"2-12", true}, {"2-12:30", true}, {"2-12:30:15", true}, {"0", true},
		{"", false}, {"1h", false}, {"1:2:3:4", false}, {"01:60", false}, {"2-24", false},
		{"2-", false}, {"-12", false}, {"1-2-3", false}, {"01: 00", false}, {"UNLIMITED", false},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			if got := validSlurmTime(tt.in); got != tt.ok {
				t.Errorf("validSlurmTime(%q) = %v, want %v", tt.in, got, tt.ok)
			}
		})
	}
}

// TestIndexLines checks the line finder on the forms TOML allows for
// writing a key.
func TestIndexLines(t *testing.T) {
	src := `a = 1 # comment with key = 2
"quoted key" = 'x'
text = """
not.a.key = 1
[not.a.table]
"""
arr = [
  1,
  [2, 3],
  { k = "v" },
]
[t]
d.e = { f = 1, g.h = 2 }
'lit.key' = true
[ t2 . "s p" ]
x = 1
[[aot]]
y = 1
[[aot]]
z = 2
`
	lines := indexLines(src)
	want := map[string]int{
		"a": 1, `"quoted key"`: 2, "text": 3, "arr": 7, "arr[0]": 8, "arr[1]": 9, "arr[2]": 10, "arr.k": 10,
		"t": 12, "t.d": 13, "t.d.e": 13, "t.d.e.f": 13, "t.d.e.g.h": 13, `t."lit.key"`: 14,
		"t2": 15, `t2."s p"`: 15, `t2."s p".x`: 16, "aot": 17, "aot.y": 18, "aot.z": 20,
	}
	for k, n := range want {
		if lines[k] != n {
			t.Errorf("line of %s: %d, want %d", k, lines[k], n)
		}
	}
	for _, k := range []string{"not", "not.a.key", "not.a", "not.a.table"} {
		if _, ok := lines[k]; ok {
			t.Errorf("%s found inside a string", k)
		}
	}
}

// FuzzIndexLines: on any input the line finder ends without panicking,
// and on valid TOML within the limits it finds a line for every key the
// library reports (up to maxKeyDepth deep).
func FuzzIndexLines(f *testing.F) {
	for _, pattern := range []string{"testdata/*/*.toml", "../testdata/*.toml"} {
		files, _ := filepath.Glob(pattern)
		for _, file := range files {
			if data, err := os.ReadFile(file); err == nil {
				f.Add(string(data))
			}
		}
	}
	f.Add("a = [\n'''x\n]'''\n, \"\"\"y\"\"\"\"\"]\nb = 1\n")
	f.Add("a.'b c'.\"d\" = { e = [ { f = 1 } ] }\r\nb = 2\r\n")
	f.Add("[a\n")
	f.Fuzz(func(t *testing.T, src string) {
		lines := indexLines(src)
		if checkLimits(src) != nil {
			return // the library's cost is not bounded beyond them
		}
		var v map[string]any
		md, err := toml.Decode(src, &v)
		if err != nil {
			return
		}
		for _, k := range md.Keys() {
			if len(k) <= maxKeyDepth && lines[k.String()] == 0 {
				t.Errorf("no line for key %s in\n%s", k, src)
			}
		}
	})
}
