package actorrt_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/monarch-go/monarch/actorrt"
)

// Lingerer starts a goroutine (ctx.Go) that, once the actor ends, takes a
// while to wind down and notes it in a file; its Cleanup notes itself
// after.
type Lingerer struct{ path string }

func (l *Lingerer) Init(ctx *actorrt.Context, path string) error { l.path = path; return nil }

func (l *Lingerer) Start(ctx *actorrt.Context) error {
	ctx.Go(func(ctx *actorrt.Context) error {
		<-ctx.Done()
		time.Sleep(300 * time.Millisecond)
		return appendLine(l.path, "goroutine")
	})
	return nil
}

func (l *Lingerer) Cleanup(ctx *actorrt.Context, cause error) error {
	return appendLine(l.path, "cleanup")
}

func appendLine(path, line string) error {
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = f.WriteString(line + "\n")
	return err
}

// TestCleanupAfterGoroutines: an actor's Cleanup runs after its ctx.Go
// functions returned, so that it sees the state they left.
func TestCleanupAfterGoroutines(t *testing.T) {
	inProcess(t)
	ctx := testCtx(t)
	path := filepath.Join(t.TempDir(), "log")
	procs := spawnProcs(t, actorrt.Dims{{"gpus", 1}})
	l, err := actorrt.Init1((*Lingerer).Init).Spawn(ctx, procs, "lingerer", path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := actorrt.VoidMethod((*Lingerer).Start).CallOne(l).Get(ctx); err != nil {
		t.Fatal(err)
	}
	if err := l.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		b, _ := os.ReadFile(path)
		if string(b) == "goroutine\ncleanup\n" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the file has %q, want the goroutine's line, then Cleanup's", b)
		}
	}
}
