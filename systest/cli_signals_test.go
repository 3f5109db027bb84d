package systest

import (
	"bufio"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/monarch-go/monarch/internal/testenv"
	"github.com/monarch-go/monarch/logagg"
)

// A command with nothing to tear down ends at once on SIGTERM or SIGINT,
// killed by the signal as a shell expects (it shows 143 and 130), even
// while it waits on input: here `config check` reading a FIFO whose
// writer never closes it (#10).
func TestCLISignalEndsAtOnce(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			fifo := filepath.Join(t.TempDir(), "slow.toml")
			if err := syscall.Mkfifo(fifo, 0o600); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(filepath.Join(build(t), "monarch"), "config", "check", fifo)
			var stderr testenv.SyncBuffer
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			defer func() {
				cmd.Process.Kill()
				<-done
			}()
			// Opening the FIFO to write returns once monarch has opened it to
			// read: monarch then waits in its read, for data or EOF.
			w := openWriterBounded(t, fifo, done)
			defer w.Close()
			cmd.Process.Signal(sig)
			select {
			case err := <-done:
				var ee *exec.ExitError
				if !errors.As(err, &ee) {
					t.Fatalf("monarch config check: %v after %v, want killed by it", err, sig)
				}
				if ws := ee.Sys().(syscall.WaitStatus); !ws.Signaled() || ws.Signal() != sig {
					t.Fatalf("monarch config check: %v after %v, want killed by it; stderr %q", err, sig, stderr.String())
				}
				done <- err // for the deferred wait
			case <-time.After(10 * time.Second):
				t.Fatalf("monarch config check still running 10s after %v", sig)
			}
		})
	}
}

// openWriterBounded opens fifo for writing, which blocks until a reader
// opens it; if monarch ends or 20s pass first, it fails the test.
func openWriterBounded(t *testing.T, fifo string, monarchDone chan error) *os.File {
	t.Helper()
	opened := make(chan *os.File, 1)
	go func() {
		f, err := os.OpenFile(fifo, os.O_WRONLY, 0)
		if err != nil {
			close(opened)
			return
		}
		opened <- f
	}()
	unblock := func() { // a reader of our own lets the open return
		if r, err := os.OpenFile(fifo, os.O_RDONLY|syscall.O_NONBLOCK, 0); err == nil {
			if f := <-opened; f != nil {
				f.Close()
			}
			r.Close()
		}
	}
	select {
	case f, ok := <-opened:
		if !ok {
			t.Fatal("cannot open the FIFO")
		}
		return f
	case err := <-monarchDone:
		unblock()
		monarchDone <- err
		t.Fatalf("monarch ended before reading the FIFO: %v", err)
	case <-time.After(20 * time.Second):
		unblock()
		t.Fatal("monarch did not open the FIFO within 20s")
	}
	return nil
}

// `monarch logs -f` keeps its clean end on Ctrl-C (and on SIGTERM): the
// lines so far are printed, and it exits 0.
func TestCLILogsFollowEndsCleanlyOnSignal(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			state := t.TempDir()
			w, err := logagg.NewWriter(state, "live", 0)
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			w.Write(logagg.Line{Time: time.Now(), Rank: 0, Stream: logagg.Stdout, Text: "hello"})
			w.Flush()
			cmd := exec.Command(filepath.Join(build(t), "monarch"), "logs", "-f", "live")
			cmd.Env = append(os.Environ(), "MONARCH_STATE_DIR="+state)
			var stderr testenv.SyncBuffer
			cmd.Stderr = &stderr
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			timer := time.AfterFunc(30*time.Second, func() { cmd.Process.Kill() })
			defer timer.Stop()
			sc := bufio.NewScanner(out)
			if !sc.Scan() || sc.Text() != "[0] hello" {
				cmd.Process.Kill()
				cmd.Wait()
				t.Fatalf("logs -f printed %q first, want [0] hello; stderr %q", sc.Text(), stderr.String())
			}
			cmd.Process.Signal(sig)
			var rest strings.Builder
			for sc.Scan() {
				rest.WriteString(sc.Text() + "\n")
			}
			if err := cmd.Wait(); err != nil || rest.Len() != 0 {
				t.Fatalf("logs -f after %v: %v, more output %q, stderr %q; want exit 0", sig, err, rest.String(), stderr.String())
			}
		})
	}
}

// The commands that tear down keep their order and exit statuses: the
// program gets the signal, stops its procs and exits 130 after SIGINT,
// 143 after SIGTERM, and monarch with it.
func TestCLIRunAndLocalTearDownOnSignal(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("MONARCH_STATE_DIR", t.TempDir())
	testenv.WriteFile(t, dir, "hosts.toml", "scheduler = \"local\"\n")
	job := testenv.WriteFile(t, dir, "job.toml", holdLines(t)+"hosts = \"hosts.toml\"\n[procs]\ngpus = 1\n")
	for _, args := range [][]string{append([]string{"local", "--hosts", "1", "--"}, holdArgv(t)...), {"run", job}} {
		for sig, want := range map[syscall.Signal]int{syscall.SIGINT: 130, syscall.SIGTERM: 143} {
			cmd := exec.Command(filepath.Join(build(t), "monarch"), args...)
			var stderr testenv.SyncBuffer
			cmd.Stderr = &stderr
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			timer := time.AfterFunc(60*time.Second, func() { cmd.Process.Kill() })
			sc := bufio.NewScanner(out)
			for sc.Scan() && !isHolding(sc.Text()) {
			}
			cmd.Process.Signal(sig)
			for sc.Scan() {
			}
			err = cmd.Wait()
			timer.Stop()
			if code := cmd.ProcessState.ExitCode(); code != want {
				t.Errorf("monarch %q after %v: %v, want exit status %d; stderr:\n%s", args, sig, err, want, stderr.String())
			}
		}
	}
}
