package actorrt_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/monarch-go/monarch/actorrt"
	"github.com/monarch-go/monarch/logagg"
)

// Printer writes lines to its proc's stdout, as user code does.
type Printer struct{}

func (p *Printer) Print(ctx *actorrt.Context, n int) error {
	w := bufio.NewWriter(os.Stdout)
	r := ctx.ActorInstance().Rank().Rank()
	for i := 0; i < n; i++ {
		fmt.Fprintf(w, "proc %d line %d\n", r, i)
	}
	return w.Flush()
}

// helperLogLines is a client whose 8 procs print LOG_LINES lines each; it
// exits as soon as they have (the flush barrier must still print all).
func helperLogLines() int {
	return actorrt.Run(func(ctx context.Context) error {
		n, _ := strconv.Atoi(os.Getenv("LOG_LINES"))
		procs, err := actorrt.ThisHost(ctx).SpawnProcs(ctx, actorrt.Dims{{"gpus", 8}})
		if err != nil {
			return err
		}
		if w := os.Getenv("LOG_WINDOW"); w != "" {
			d, _ := time.ParseDuration(w)
			if err := procs.SetLogOptions(ctx, actorrt.LogOptions{StreamToClient: true, AggregateWindow: d}); err != nil {
				return err
			}
		}
		p, err := actorrt.Spawn[Printer](ctx, procs, "printers")
		if err != nil {
			return err
		}
		if _, err := actorrt.VoidMethod1((*Printer).Print).Call(p, n).Get(ctx); err != nil {
			return err
		}
		fmt.Println("CLIENT DONE")
		return nil
	})
}

// runLogHelper runs the helper and returns its stdout and stderr.
func runLogHelper(t *testing.T, env ...string) (string, string, error) {
	t.Helper()
	cmd := helperCmd(t, "loglines")
	cmd.Env = append(cmd.Env, env...)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return stdout.String(), stderr.String(), err
	case <-time.After(2 * time.Minute):
		cmd.Process.Kill()
		t.Fatal("log helper did not finish within 2 minutes")
		return "", "", nil
	}
}

var rawLine = regexp.MustCompile(`^\[(\d+)\] proc (\d+) line (\d+)$`)

// checkSequences checks that each of 8 procs' n lines came exactly once
// and in order.
func checkSequences(t *testing.T, seen map[int][]int, n int) {
	t.Helper()
	for r := 0; r < 8; r++ {
		s := seen[r]
		if len(s) != n {
			t.Errorf("proc %d: %d lines, want %d", r, len(s), n)
			continue
		}
		for i, v := range s {
			if v != i {
				t.Errorf("proc %d: line %d is %d: out of order or repeated", r, i, v)
				break
			}
		}
	}
}

// TestLogsRaw: 8 procs x 10,000 lines: every line printed by the client
// exactly once, in order per proc, with its rank; all recorded in the
// job's log too. The client exits right after: the flush barrier.
func TestLogsRaw(t *testing.T) {
	const n = 10000
	state := t.TempDir()
	out, stderr, err := runLogHelper(t, "LOG_LINES="+strconv.Itoa(n), "MONARCH_STATE_DIR="+state, "MONARCH_JOB=logsraw")
	if err != nil {
		t.Fatalf("helper: %v\n%s", err, stderr)
	}
	seen := map[int][]int{}
	for _, line := range strings.Split(out, "\n") {
		m := rawLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		rank, _ := strconv.Atoi(m[1])
		proc, _ := strconv.Atoi(m[2])
		i, _ := strconv.Atoi(m[3])
		if rank != proc {
			t.Fatalf("line %q carries rank %d", line, rank)
		}
		seen[rank] = append(seen[rank], i)
	}
	checkSequences(t, seen, n)

	recorded := map[int][]int{}
	ctx, cancel := context.WithTimeout(clientCtx, 30*time.Second)
	defer cancel()
	err = logagg.Read(ctx, state, "logsraw", logagg.Filter{}, false, func(l logagg.Line) error {
		var proc, i int
		if _, err := fmt.Sscanf(l.Text, "proc %d line %d", &proc, &i); err == nil && proc == l.Rank {
			recorded[l.Rank] = append(recorded[l.Rank], i)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	checkSequences(t, recorded, n)
}

var groupLine = regexp.MustCompile(`^\[(\d+) similar log lines\] \[\d+\] proc \d+ line \d+$`)

// TestLogsAggregated: the same lines through a 1 s window: groups whose
// counts add up to every line written.
func TestLogsAggregated(t *testing.T) {
	const n = 10000
	out, stderr, err := runLogHelper(t, "LOG_LINES="+strconv.Itoa(n), "LOG_WINDOW=1s", "MONARCH_STATE_DIR="+t.TempDir())
	if err != nil {
		t.Fatalf("helper: %v\n%s", err, stderr)
	}
	total, groups := 0, 0
	for _, line := range strings.Split(out, "\n") {
		if m := groupLine.FindStringSubmatch(line); m != nil {
			c, _ := strconv.Atoi(m[1])
			total += c
			groups++
		} else if rawLine.MatchString(line) {
			total++
			groups++
		}
	}
	if total != 8*n {
		t.Fatalf("groups add up to %d lines, want %d:\n%s", total, 8*n, out)
	}
	if groups > 8*n/100 {
		t.Fatalf("%d groups for %d lines: not aggregated", groups, 8*n)
	}
	t.Logf("%d lines in %d groups", total, groups)
}

// TestBadLogLevel: an invalid MONARCH_FILE_LOG is refused, naming the
// valid levels.
func TestBadLogLevel(t *testing.T) {
	_, stderr, err := runLogHelper(t, "LOG_LINES=1", "MONARCH_FILE_LOG=LOUD")
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() == 0 {
		t.Fatalf("helper with a bad level: %v", err)
	}
	if !strings.Contains(stderr, "MONARCH_FILE_LOG") || !strings.Contains(stderr, "TRACE, DEBUG, INFO, WARN, ERROR") {
		t.Fatalf("stderr:\n%s", stderr)
	}
}
