package systest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/monarch-go/monarch/internal/testcluster"
	"github.com/monarch-go/monarch/internal/testenv"
)

// The CLI is tested as users run it: the real binary, built once.
var (
	buildOnce sync.Once
	binDir    string
	buildErr  error
)

func build(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		binDir, buildErr = os.MkdirTemp("", "monarch-cli-test")
		if buildErr != nil {
			return
		}
		for pkg, name := range map[string]string{".": "monarch", "./examples/getting_started": "getting_started",
			"./examples/multihost": "multihost", "./testprogs/nostop": "nostop", "./testprogs/race": "race",
			"./testprogs/scale": "scale", "./testprogs/cut": "cut", "./testprogs/inspect": "inspect",
			"./testprogs/feed": "feed", "./testprogs/killexit": "killexit", "./testprogs/spares": "spares",
			"./examples/checkpoint": "checkpoint", "./examples/ddp": "ddp", "./examples/pipeline": "pipeline",
			"./examples/controller": "controller"} {
			out, err := exec.Command("go", "build", "-o", filepath.Join(binDir, name), pkg).CombinedOutput()
			if err != nil {
				buildErr = err
				os.Stderr.Write(out)
				return
			}
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binDir
}

// A held job is the multihost example keeping its trainers (2 procs a
// host unless the job's [procs] says) until it is stopped, at most ten
// minutes. Its trainers each print a line with "stepping on" in their
// logs; the program prints a line that isHolding reports once they hold.
var holdArgs = []string{"-gpus", "2", "-hold", "10m"}

// holdArgv is the command line of a held job's program.
func holdArgv(t testing.TB) []string {
	return append([]string{filepath.Join(build(t), "multihost")}, holdArgs...)
}

// holdLines are a job file's lines that make it a held job.
func holdLines(t testing.TB) string {
	return fmt.Sprintf("program = %q\nargs = [%q, %q, %q, %q]\n", filepath.Join(build(t), "multihost"), holdArgs[0], holdArgs[1], holdArgs[2], holdArgs[3])
}

func isHolding(line string) bool { return strings.HasPrefix(line, "holding the trainers") }

func TestMain(m *testing.M) {
	// From the repository's root (see doc.go).
	if err := os.Chdir(".."); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	// The hosts of the test cluster run ssh sessions with a HOME of their
	// own: that is checked too.
	env := testenv.Setup(filepath.Join(testcluster.SSHHome(), ".monarch", "jobs"))
	code := m.Run()
	testcluster.StopIfStarted()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(env.Finish(code))
}

// monarch runs the binary with a bound and returns stdout, stderr and the
// exit status.
func monarch(t testing.TB, args ...string) (string, string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(build(t), "monarch"), args...)
	// Past the bound, SIGQUIT: the client writes every goroutine's stack
	// to stderr, which says where it waits; SIGKILL 10 s later.
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGQUIT) }
	cmd.WaitDelay = 10 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("monarch %v did not finish within 2 minutes\nstdout:\n%s\nstderr (with the stacks at SIGQUIT):\n%s", args, stdout.String(), stderr.String())
	}
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return stdout.String(), stderr.String(), code
}

func TestHelpListsOnlyWorkingCommands(t *testing.T) {
	out, _, code := monarch(t, "--help")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	var commands []string
	in := false
	for _, line := range strings.Split(out, "\n") {
		switch {
		case strings.HasPrefix(line, "COMMANDS:"):
			in = true
		case in && strings.TrimSpace(line) == "":
			in = false
		case in:
			commands = append(commands, strings.Fields(line)[0])
		}
	}
	want := "version run local status stop clean logs stacks dashboard profile exec top config" // agent is for launchers only: hidden
	if got := strings.Join(commands, " "); got != want {
		t.Fatalf("commands %q, want %q", got, want)
	}
}

func TestVersion(t *testing.T) {
	out, _, code := monarch(t, "version")
	if code != 0 || !strings.HasPrefix(out, "monarch ") {
		t.Fatalf("exit %d, output %q", code, out)
	}
}

func TestLocalExitStatus(t *testing.T) {
	tests := []struct {
		name string
		args []string
		code int
		err  string
	}{
		{"status passes through", []string{"local", "--", "sh", "-c", "exit 7"}, 7, ""},
		{"success", []string{"local", "--", "true"}, 0, ""},
		{"no program", []string{"local"}, 2, "no job file or program given"},
		{"missing program", []string{"local", "--", "/no/such/program"}, 1, "/no/such/program"},
		{"killed by a signal", []string{"local", "--", "sh", "-c", "kill -TERM $$"}, 128 + 15, ""},
		{"unknown command", []string{"frobnicate"}, 2, "unknown command \"frobnicate\""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, stderr, code := monarch(t, tt.args...)
			if code != tt.code || !strings.Contains(stderr, tt.err) {
				t.Fatalf("exit %d, stderr %q; want %d and %q", code, stderr, tt.code, tt.err)
			}
		})
	}
}

// TestLocalRunsTheExample runs the getting-started example under monarch
// local (the bus is then monarch's, reached over TCP) and checks the
// guide's values.
func TestLocalRunsTheExample(t *testing.T) {
	out, stderr, code := monarch(t, "local", "--", filepath.Join(build(t), "getting_started"))
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, stderr)
	}
	for _, want := range []string{
		"Counter value: 0",
		"ValueMesh{gpus: 8} [2 2 2 2 1 1 1 1]",
		"{gpus: 3}: Trainer {gpus: 3} taking a step.",
		"Actor rank: {gpus: 3}, message rank: {gpus: 1}",
		"recorder {gpus: 1} got 100 messages, in order: true",
		"{gpus: 2}: Step with data <data 1 from loader {gpus: 2}> and input = none",
		"== Free remote functions",
		"inferred with: 1\ninferred with: 1\n",
		"It didn't say hello (errorful[0].SayHello: I don't want to)",
		"Failure received: mesh supervised: actor supervised[0] {gpus: 0}",
		"Mesh failure was not handled: mesh errorful: actor errorful[0]",
		"worker synced 4000000 bytes via shm, sha256 ",
		"DTensor(shard (3, 4) on {gpus: 4})",
		"{gpus: 3}: Step with input [",
		"relu(linear.forward.rref(t)) {gpus: 0} (3, 4)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}
