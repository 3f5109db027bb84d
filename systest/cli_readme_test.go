package systest

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/monarch-go/monarch/internal/testenv"
	"github.com/monarch-go/monarch/logagg"
)

// readmeShapes: each monarch command line of README.md and the docs/
// pages, as written there, and command lines of that shape. JOB.toml,
// HOSTS.toml and JOB stand for a local job file, its hosts file and a job
// with a log, MULTIHOST for the multihost example.
var readmeShapes = map[string][][]string{
	"monarch run JOB.toml [--detach] [-N N] [-t TIME] [-p PART] [-J NAME] [-o FILE]": {
		{"run", "JOB.toml"}, {"run", "JOB.toml", "--detach"}, {"run", "--detach", "JOB.toml", "-o", "/dev/null"},
		{"run", "JOB.toml", "-N", "2", "-t", "30", "-p", "debug", "-J", "x"}, // refused: the hosts are local
	},
	"monarch clean [--older-than AGE]":            {{"clean", "--older-than", "1000d"}},
	"monarch logs -f j11e76fGPENLH":               {{"logs", "-f", "JOB"}},
	"monarch status j11e76fGPENLH":                {{"status", "JOB"}},
	"monarch stop j11e76fGPENLH":                  {{"stop", "JOB"}},
	"monarch run job.toml -N 4 -t 2:00:00 -p gpu": {{"run", "JOB.toml", "-N", "4", "-t", "2:00:00", "-p", "gpu"}},
	"monarch logs -f ID":                          {{"logs", "-f", "JOB"}},
	"monarch local [--hosts N] (JOB.toml | [--] PROGRAM [ARGS...])": {
		{"local", "JOB.toml"}, {"local", "--hosts", "2", "JOB.toml"}, {"local", "JOB.toml", "--hosts", "2"},
		{"local", "--", "/bin/echo"}, {"local", "--hosts", "2", "--", "/bin/echo", "a", "--b"},
		{"local", "/bin/echo", "--hosts", "2"}, {"local", "--hosts", "2", "/bin/echo", "-n", "x"},
	},
	"monarch local --procs DIMS -- COMMAND [ARGS...]": {
		{"local", "--procs", "gpus=2", "--", "/bin/echo"}, {"local", "--hosts", "2", "--procs", "a=1,b=2", "--", "/bin/echo", "-n", "x"},
		{"local", "--procs", "gpus=2", "/bin/echo", "--procs", "x"},
	},
	"monarch local --procs gpus=4 -- python3 train.py":                              {{"local", "--procs", "gpus=4", "--", "/bin/true", "train.py"}},
	"monarch local --hosts 2 --procs gpus=2 -- python3 testdata/torch/allreduce.py": {{"local", "--hosts", "2", "--procs", "gpus=2", "--", "/bin/true", "x.py"}},
	"monarch status [JOB]": {{"status"}, {"status", "JOB"}},
	"monarch logs [JOB] [-f] [filters]": {
		{"logs"}, {"logs", "JOB"}, {"logs", "JOB", "-f"}, {"logs", "-f", "JOB"},
		{"logs", "JOB", "-f", "--since", "1h", "--host", "h", "--rank", "0", "--stream", "stdout", "--grep", "x", "--raw"},
		{"logs", "JOB", "--aggregate", "3s"},
	},
	"monarch stop JOB": {{"stop", "JOB"}},
	"monarch stacks [JOB] [--rank R] [--host H] [--mesh M] [--timeout D]": {{"stacks"}, {"stacks", "JOB", "--rank", "0", "--host", "h", "--mesh", "m", "--timeout", "2s"}},

	"monarch profile [JOB] [--seconds N | --heap] [--rank R] [--host H] [--mesh M] -o FILE": {
		{"profile", "-o", "x.pprof"}, {"profile", "JOB", "--heap", "-o", "x.pprof"},
		{"profile", "JOB", "--seconds", "2", "--rank", "0", "--host", "h", "--mesh", "m", "-o", "x.pprof"},
	},

	"monarch dashboard [JOB]": {{"dashboard"}, {"dashboard", "JOB"}},
	"monarch exec [JOB] (--host H | --all) [--timeout D] -- COMMAND [ARGS...]": {{"exec", "JOB", "--all", "--", "true"}, {"exec", "--host", "h", "--timeout", "5s", "--", "true"}},
	"monarch top [JOB] [--interval D] [--once]":                                {{"top"}, {"top", "JOB", "--interval", "2s", "--once"}},
	"monarch top": {{"top"}},
	// docs/sweeps.md
	"monarch local --detach -- sh -c 'sleep 2 && echo trained'":                                       {{"local", "--detach", "--", "/bin/sh", "-c", "true"}},
	"monarch local --array 0-3%2 -- sh -c 'echo \"task $MONARCH_ARRAY_INDEX of $MONARCH_ARRAY_JOB\"'": {{"local", "--array", "0-1%1", "--", "/bin/true"}},
	"monarch status j11e76fGPENLH:3":                                                                  {{"status", "JOB:3"}},
	"monarch logs j11e76fGPENLH_3":                                                                    {{"logs", "JOB_3"}},
	"monarch stop j11e76fGPENLH_3":                                                                    {{"stop", "JOB_3"}},
	"monarch local --detach --after-ok j163a5fPTNIL3 -- echo evaluated":                               {{"local", "--detach", "--after-ok", "JOB", "--", "/bin/echo", "x"}},
	"monarch status j163a5fYG2TDY":                                                                    {{"status", "JOB"}},
	"monarch local --hosts 2 -- bin/multihost -gpus 2 -hold 10m":                                      {{"local", "--hosts", "2", "--", "MULTIHOST", "-gpus", "1", "-hold", "1ms"}},
	"monarch config check FILE":                                                                       {{"config", "check", "JOB.toml"}, {"config", "check", "HOSTS.toml"}},
	"monarch version":                                                                                 {{"version"}, {"--version"}},
	"monarch help [COMMAND]":                                                                          {{"help"}, {"help", "run"}, {"help", "config", "check"}, {"run", "--help"}, {"config", "check", "--help"}},
	"monarch config check job.toml":                                                                   {{"config", "check", "JOB.toml"}},
	"monarch run job.toml":                                                                            {{"run", "JOB.toml"}},
	"monarch run job.toml --detach":                                                                   {{"run", "JOB.toml", "--detach"}},
	"monarch status":                                                                                  {{"status"}},
	"monarch stop ID":                                                                                 {{"stop", "JOB"}},
}

// docPages are the pages whose command lines TestCLIReadmeCommands runs:
// the front page and every page of docs/, so that a page added later is
// covered without a change here.
func docPages(t *testing.T) []string {
	t.Helper()
	pages, err := filepath.Glob("docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	return append([]string{"README.md"}, pages...)
}

// docCommand is a command line a page shows, and where.
type docCommand struct {
	line string
	page string // README.md or docs/NAME.md
	sh   bool   // in a ```sh block: a command to run, not only to show
}

// readmeCommands returns the command lines of the code blocks of
// README.md and of every docs/*.md page, without their comments and
// descriptions: each monarch command line once, with the first page that
// shows it, and every other line of a ```sh block.
func readmeCommands(t *testing.T) []docCommand {
	t.Helper()
	var cmds []docCommand
	shown := map[string]bool{}
	for _, p := range docPages(t) {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		inBlock, sh := false, false
		for _, line := range strings.Split(string(data), "\n") {
			if fence, ok := strings.CutPrefix(line, "```"); ok {
				inBlock, sh = !inBlock, !inBlock && strings.TrimSpace(fence) == "sh"
				continue
			}
			if !inBlock {
				continue
			}
			line, _, _ = strings.Cut(line, "#") // a comment, which may hold a ';'
			for _, part := range strings.Split(line, ";") {
				part, _, _ = strings.Cut(strings.TrimSpace(part), "  ") // a description follows
				switch {
				case strings.HasPrefix(part, "monarch "):
					if !shown[part] {
						shown[part] = true
						cmds = append(cmds, docCommand{part, p, sh})
					}
				case sh && part != "":
					cmds = append(cmds, docCommand{part, p, sh})
				}
			}
		}
	}
	return cmds
}

// runDocShellLine runs a line of a ```sh block that is not a monarch
// command: `go build -o OUT ./PKG` builds PKG (into a temporary OUT), and
// `make TARGET...` is checked to name targets of the Makefile (make itself
// would run this test again). Any other line is an error: show it in a
// plain ``` block, or teach this function to run it.
func runDocShellLine(t *testing.T, c docCommand) {
	f := strings.Fields(c.line)
	switch {
	case len(f) == 5 && f[0] == "go" && f[1] == "build" && f[2] == "-o":
		out := filepath.Join(t.TempDir(), filepath.Base(f[3]))
		if b, err := exec.Command("go", "build", "-o", out, f[4]).CombinedOutput(); err != nil {
			t.Errorf("%s: %s: %v\n%s", c.page, c.line, err, b)
		}
	case len(f) >= 2 && f[0] == "make":
		mk, err := os.ReadFile("Makefile")
		if err != nil {
			t.Fatal(err)
		}
		for _, target := range f[1:] {
			if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(target) + `:`).Match(mk) {
				t.Errorf("%s: %s: the Makefile has no target %s", c.page, c.line, target)
			}
		}
	default:
		t.Errorf("%s shows %q in a ```sh block, a line TestCLIReadmeCommands cannot run: show it in a plain ``` block, or make runDocShellLine run it", c.page, c.line)
	}
}

// Every command line README.md and the docs/ pages show is accepted as
// written: the real binary runs lines of its shape against a local job,
// and none is a usage error; with --help added each shows its command's
// help. The other lines of their ```sh blocks run too (runDocShellLine).
func TestCLIReadmeCommands(t *testing.T) {
	var cmds []string
	page := map[string]string{}
	for _, c := range readmeCommands(t) {
		if !strings.HasPrefix(c.line, "monarch ") {
			runDocShellLine(t, c)
			continue
		}
		cmds = append(cmds, c.line)
		page[c.line] = c.page
	}
	if len(cmds) < 10 {
		t.Fatalf("found only %d command lines in README.md and docs/*.md: %q", len(cmds), cmds)
	}
	dir := t.TempDir()
	state := t.TempDir()
	t.Setenv("MONARCH_STATE_DIR", state)
	hosts := testenv.WriteFile(t, dir, "hosts.toml", "scheduler = \"local\"\n")
	job := testenv.ShJob(t, dir, "echo ran", hosts)
	w, err := logagg.NewWriter(state, "j1", 0)
	if err != nil {
		t.Fatal(err)
	}
	w.Write(logagg.Line{Time: time.Now(), Host: "h", Stream: logagg.Stdout, Text: "x"})
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	subst := strings.NewReplacer("JOB.toml", job, "HOSTS.toml", hosts, "JOB", "j1", "MULTIHOST", filepath.Join(build(t), "multihost"))
	for _, c := range cmds {
		shapes, ok := readmeShapes[c]
		if !ok {
			t.Errorf("%s shows %q: add command lines of its shape to readmeShapes", page[c], c)
			continue
		}
		for _, shape := range shapes {
			args := make([]string, len(shape))
			for i, a := range shape {
				args[i] = subst.Replace(a)
			}
			_, stderr, code := monarch(t, args...)
			if code == 2 || strings.Contains(stderr, "usage:") {
				t.Errorf("monarch %q (%s: %s): a usage error: exit %d\n%s", args, page[c], c, code, stderr)
			}
			switch {
			case args[0] == "local" && !slices.Contains(args, job), slices.Contains(args, "--"):
				continue // an added --help would be the program's
			case args[0] == "help", strings.HasPrefix(args[0], "-"), slices.Contains(args, "--help"):
				continue // help already
			}
			out, stderr, code := monarch(t, append(args, "--help")...)
			name := args[0]
			if name == "config" {
				name = "config check"
			}
			if code != 0 || !strings.HasPrefix(out, "NAME:\n   monarch "+name+" - ") {
				t.Errorf("monarch %q --help: exit %d, stdout %q, stderr %q", args, code, out, stderr)
			}
		}
	}
	// The ones that run the job ran it.
	if out, stderr, code := monarch(t, "run", job); code != 0 || out != "ran\n" {
		t.Errorf("monarch run %s: exit %d, %q %q", job, code, out, stderr)
	}
	for shape := range readmeShapes {
		if !slices.Contains(cmds, shape) {
			t.Errorf("readmeShapes has %q, which neither README.md nor a docs/*.md page shows", shape)
		}
	}
}
