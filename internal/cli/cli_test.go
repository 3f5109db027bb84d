package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/monarch-go/monarch/internal/testenv"
	"github.com/urfave/cli/v2"
)

// runCLI runs a command line in-process, as main does, and returns its
// stdout, stderr and exit status.
func runCLI(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	var out, errw testenv.SyncBuffer
	code := newApp(&out, &errw).run(context.Background(), append([]string{"monarch"}, args...))
	return out.String(), errw.String(), code
}

// commandPaths lists every command of the app, subcommands as
// "config check", hidden ones too.
func commandPaths() []string {
	var paths []string
	var walk func(prefix string, cmds []*cli.Command)
	walk = func(prefix string, cmds []*cli.Command) {
		for _, c := range cmds {
			paths = append(paths, prefix+c.Name)
			walk(prefix+c.Name+" ", c.Subcommands)
		}
	}
	walk("", newApp(nil, nil).cli.Commands)
	return paths
}

// Flags may follow the arguments (#6): docs/cli.md's own `monarch run
// job.toml --detach`, `monarch local job.toml --hosts 3`; while a
// program's own arguments reach it untouched, with or without "--".
func TestCLIFlagsAfterArguments(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("MONARCH_STATE_DIR", t.TempDir())
	t.Setenv("MONARCH_HOSTS", "")
	hosts := testenv.WriteFile(t, dir, "hosts.toml", "scheduler = \"local\"\n")
	// No hosts: in-process, a host agent would be this test binary.
	job := testenv.ShJob(t, dir, "echo ran", "")
	prog := testenv.WriteFile(t, dir, "prog.toml", "#!/bin/sh\necho prog ran\n")
	if err := os.Chmod(prog, 0o755); err != nil {
		t.Fatal(err)
	}
	printArgs := []string{"/bin/sh", "-c", `printf '%s|' "$@"`, "sh", "--hosts", "3", "-x", "--", "y"}
	tests := []struct {
		name     string
		args     []string
		out, err string // substrings
		code     int
	}{
		{"run JOB.toml", []string{"run", job}, "ran\n", "", 0},
		{"local JOB --hosts 0", []string{"local", job, "--hosts", "0"}, "", "local: --hosts 0: want 1 or more", 2},
		{"program's flags without --", append([]string{"local"}, printArgs...), "--hosts|3|-x|--|y|", "", 0},
		{"program's flags after --", append([]string{"local", "--"}, printArgs...), "--hosts|3|-x|--|y|", "", 0},
		{"a program named .toml after --", []string{"local", "--", prog}, "prog ran\n", "", 0},
		{"a program named .toml after --hosts and --", []string{"local", "--hosts=1", "--", prog}, "prog ran\n", "", 0},
		{"config check FILE --help", []string{"config", "check", hosts, "--help"}, "NAME:\n   monarch config check - ", "", 0},
		{"stop JOB --bogus", []string{"stop", "j1", "--bogus"}, "", "stop: unknown flag --bogus", 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, errOut, code := runCLI(t, tt.args...)
			if code != tt.code || !strings.Contains(out, tt.out) || !strings.Contains(errOut, tt.err) {
				t.Fatalf("monarch %q: exit %d, stdout %q, stderr %q; want %d, %q, %q", tt.args, code, out, errOut, tt.code, tt.out, tt.err)
			}
		})
	}
}

// commandLine puts the flags where urfave/cli parses them, and leaves
// what follows "--" or a program's name as written.
func TestCLICommandLine(t *testing.T) {
	tests := []struct{ in, want string }{
		{"run job.toml --detach", "run --detach job.toml"},
		{"run --detach job.toml", "run --detach job.toml"},
		{"local job.toml --hosts 3", "local --hosts 3 job.toml"},
		{"local job.toml --hosts=3", "local --hosts=3 job.toml"},
		{"local --hosts 3 prog --hosts 4 -x", "local --hosts 3 prog --hosts 4 -x"},
		{"local prog -- x", "local prog -- x"},
		{"local -- prog --hosts 4", "local -- prog --hosts 4"},
		{"logs j1 -f --rank 3 --grep -x", "logs -f --rank 3 --grep -x j1"},
		{"logs j1 --since", "logs --since"}, // no value: the parser says so, not take j1
		{"logs j1 -- -f", "logs j1 -- -f"},
		{"logs -f -- j1", "logs -f -- j1"},
		{"stop j1 --bogus 3", "stop --bogus j1 3"}, // an unknown flag takes no value: the parser names it
		{"config check FILE --help", "config check --help"},
		{"run job.toml -h", "run --help"},
		{"logs j1 -fh", "logs --help"},
		{"logs j1 -fx", "logs -fx j1"},
		{"help help run", "run --help"},
		{"help", "--help"},
		{"help config check", "config check --help"},
		{"help run job.toml", "run --help"},
		{"--help run", "run --help"},
		{"config nosuch --help", "config nosuch --help"},
		{"frobnicate --x y", "frobnicate --x y"},
		{"--version", "--version"},
	}
	for _, tt := range tests {
		got := newApp(nil, nil).commandLine(append([]string{"monarch"}, strings.Fields(tt.in)...))
		if want := append([]string{"monarch"}, strings.Fields(tt.want)...); !slices.Equal(got, want) {
			t.Errorf("%s: got %q, want %q", tt.in, got[1:], want[1:])
		}
	}
}

// `monarch help CMD` is `monarch CMD --help`, for every command (#7).
func TestCLIHelpCommand(t *testing.T) {
	for _, path := range append(commandPaths(), "") {
		words := strings.Fields(path)
		want, _, code := runCLI(t, append(words, "--help")...)
		if code != 0 || !strings.HasPrefix(want, "NAME:\n   monarch") {
			t.Fatalf("monarch %s --help: exit %d, %q", path, code, want)
		}
		got, errOut, code := runCLI(t, append([]string{"help"}, words...)...)
		if code != 0 || got != want {
			t.Errorf("monarch help %s: exit %d, stdout:\n%s\nstderr %q\nwant:\n%s", path, code, got, errOut, want)
		}
	}
	_, errOut, code := runCLI(t, "help", "frobnicate")
	if code != 2 || !strings.Contains(errOut, `unknown command "frobnicate"`) {
		t.Errorf("monarch help frobnicate: exit %d, %q", code, errOut)
	}
}

func TestCLIVersionFlag(t *testing.T) {
	want, _, code := runCLI(t, "version")
	if code != 0 || !strings.HasPrefix(want, "monarch "+version) {
		t.Fatalf("monarch version: exit %d, %q", code, want)
	}
	got, errOut, code := runCLI(t, "--version")
	if code != 0 || got != want {
		t.Errorf("monarch --version: exit %d, %q, stderr %q; want %q", code, got, errOut, want)
	}
}

// No flag's help says its default twice, nor that a switch is off by
// default (#7).
func TestCLIHelpSaysEachDefaultOnce(t *testing.T) {
	for _, path := range append(commandPaths(), "") {
		out, _, _ := runCLI(t, append(strings.Fields(path), "--help")...)
		for _, line := range strings.Split(out, "\n") {
			if strings.Count(line, "default") > 1 || strings.Contains(line, "(default: false)") {
				t.Errorf("monarch %s --help: %q", path, line)
			}
		}
	}
}

// A command line a command cannot take is a usage error: one line that
// says what is wrong, the command's usage line, exit status 2 (#7).
func TestCLIUsageErrors(t *testing.T) {
	dir := t.TempDir()
	job := testenv.ShJob(t, dir, "true", "")
	tests := []struct {
		args       []string
		err, usage string
	}{
		{[]string{"local", "--hosts", "abc", "--", "true"}, `local: --hosts "abc": want a whole number`, "monarch local [options] "},
		{[]string{"local", "--hosts", "0", "--", "true"}, "local: --hosts 0: want 1 or more", "monarch local "},
		{[]string{"local", "--hosts", "-1", "--", "true"}, "local: --hosts -1: want 1 or more", "monarch local "},
		{[]string{"local", "--hosts"}, "local: --hosts needs a value", "monarch local "},
		{[]string{"local"}, "local: no job file or program given", "monarch local "},
		{[]string{"local", job, "extra"}, "local: a job file takes no arguments", "monarch local "},
		{[]string{"run", "--bogus", job}, "run: unknown flag --bogus", "monarch run [options] JOB.toml"},
		{[]string{"run", job, "-z"}, "run: unknown flag -z", "monarch run [options] JOB.toml"},
		{[]string{"run"}, "run: missing JOB.toml", "monarch run "},
		{[]string{"run", job, job}, "run: too many arguments", "monarch run "},
		{[]string{"stop"}, "stop: missing JOB", "monarch stop JOB"},
		{[]string{"status", "a", "b"}, "status: too many arguments", "monarch status [JOB]"},
		{[]string{"logs", "--rank", "one"}, `logs: --rank "one": want a whole number`, "monarch logs [options] [JOB]"},
		{[]string{"config", "check"}, "config check: missing FILE", "monarch config check FILE"},
		{[]string{"config", "frobnicate"}, `config: unknown command "frobnicate"`, "monarch config COMMAND"},
		{[]string{"version", "now"}, "version: too many arguments", "monarch version"},
		{[]string{"frobnicate"}, `unknown command "frobnicate"`, "monarch COMMAND"},
		{[]string{"local", "--detatch", "true"}, "local: unknown flag --detatch; did you mean --detach?", "monarch local "},
		{[]string{"stauts"}, `unknown command "stauts"; did you mean "status"?`, "monarch COMMAND"},
		{[]string{"config", "chek", "x"}, `config: unknown command "chek"; did you mean "check"?`, "monarch config COMMAND"},
		{[]string{"--frobnicate"}, "unknown flag --frobnicate", "monarch COMMAND"},
		{[]string{"agent", "--program", "/bin/true"}, "agent: --job is required", "monarch agent "},
		{[]string{"agent", "--job", "j", "--program", "/bin/true", "--index", "-2"}, "agent: --index -2: want 0 or more", "monarch agent "},
	}
	for _, tt := range tests {
		out, errOut, code := runCLI(t, tt.args...)
		lines := strings.Split(strings.TrimSuffix(errOut, "\n"), "\n")
		if code != 2 || out != "" || len(lines) != 2 || !strings.HasPrefix(lines[0], "monarch: "+tt.err) || !strings.HasPrefix(lines[1], "usage: "+tt.usage) {
			t.Errorf("monarch %q: exit %d, stdout %q, stderr:\n%s\nwant exit 2, no stdout, and stderr:\nmonarch: %s...\nusage: %s...", tt.args, code, out, errOut, tt.err, tt.usage)
		}
	}
}

// Every command's mistyped flag, and every mistyped command, is answered
// with the word meant (issue 40): two letters swapped is one edit.
func TestCLIDidYouMean(t *testing.T) {
	swap := func(w string) string { return w[:1] + w[2:3] + w[1:2] + w[3:] }
	var walk func(prefix string, cmds []*cli.Command)
	walk = func(prefix string, cmds []*cli.Command) {
		for _, cmd := range cmds {
			if cmd.Hidden {
				continue
			}
			path := strings.Fields(prefix + cmd.Name)
			if len(cmd.Name) >= 4 && swap(cmd.Name) != cmd.Name {
				args := append(path[:len(path)-1:len(path)-1], swap(cmd.Name), "x")
				_, errOut, code := runCLI(t, args...)
				if want := fmt.Sprintf("; did you mean %q?", cmd.Name); code != 2 || !strings.Contains(errOut, want) {
					t.Errorf("monarch %q: exit %d, stderr %q; want %q", args, code, errOut, want)
				}
			}
			for _, f := range cmd.Flags {
				name := f.Names()[0]
				if v, ok := f.(cli.VisibleFlag); (ok && !v.IsVisible()) || len(name) < 4 || swap(name) == name {
					continue
				}
				args := append(path[:len(path):len(path)], "--"+swap(name))
				_, errOut, code := runCLI(t, args...)
				if want := "unknown flag --" + swap(name) + "; did you mean --" + name + "?"; code != 2 || !strings.Contains(errOut, want) {
					t.Errorf("monarch %q: exit %d, stderr %q; want %q", args, code, errOut, want)
				}
			}
			walk(prefix+cmd.Name+" ", cmd.Subcommands)
		}
	}
	walk("", newApp(nil, nil).cli.Commands)
	// monarch's own flag, and help for a mistyped command.
	for args, want := range map[string]string{
		"--verison":        "unknown flag --verison; did you mean --version?",
		"help stauts":      `unknown command "stauts"; did you mean "status"?`,
		"help config chek": `config: unknown command "chek"; did you mean "check"?`,
		"run -z":           "run: unknown flag -z\nusage:", // one letter: no guess
	} {
		_, errOut, code := runCLI(t, strings.Fields(args)...)
		if code != 2 || !strings.Contains(errOut, want) {
			t.Errorf("monarch %s: exit %d, stderr %q; want %q", args, code, errOut, want)
		}
	}
}

// A hosts file where a job file is wanted, and the reverse, is named for
// what it is (#8).
func TestCLIWrongKindOfFile(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("MONARCH_STATE_DIR", t.TempDir())
	hosts := testenv.WriteFile(t, dir, "hosts.toml", "scheduler = \"local\"\n[local]\nhosts = 2\n")
	job := testenv.ShJob(t, dir, "true", "")
	jobNamingAJob := testenv.WriteFile(t, dir, "job2.toml", "program = \"/bin/true\"\nhosts = \"job.toml\"\n")
	tests := []struct {
		name string
		env  string // MONARCH_HOSTS
		args []string
		err  string // the whole of stderr
	}{
		{"run HOSTS", "", []string{"run", hosts},
			hosts + `: this is a MONARCH_HOSTS file (it sets scheduler), not a job file: a job file names it with hosts = "` + hosts + `"`},
		{"local HOSTS", "", []string{"local", hosts},
			hosts + `: this is a MONARCH_HOSTS file (it sets scheduler), not a job file: a job file names it with hosts = "` + hosts + `"`},
		{"MONARCH_HOSTS=JOB", job, []string{"run", job},
			"$MONARCH_HOSTS: " + job + ": this is a job file (it sets program), not a MONARCH_HOSTS file: run it with monarch run " + job},
		{"hosts = JOB", "", []string{"run", jobNamingAJob},
			job + ": this is a job file (it sets program), not a MONARCH_HOSTS file: run it with monarch run " + job},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("MONARCH_HOSTS", tt.env)
			_, errOut, code := runCLI(t, tt.args...)
			if want := "monarch: " + tt.err + "\n"; code != 1 || errOut != want {
				t.Errorf("monarch %q: exit %d, stderr:\n%s\nwant exit 1 and:\n%s", tt.args, code, errOut, want)
			}
		})
	}
	// config check takes either kind, by its content.
	if out, errOut, code := runCLI(t, "config", "check", hosts); code != 0 || !strings.Contains(out, "valid MONARCH_HOSTS file") {
		t.Errorf("config check %s: exit %d, %q %q", hosts, code, out, errOut)
	}
	if out, errOut, code := runCLI(t, "config", "check", filepath.Join(dir, "job.toml")); code != 0 || !strings.Contains(out, "valid job file") {
		t.Errorf("config check job: exit %d, %q %q", code, out, errOut)
	}
}
