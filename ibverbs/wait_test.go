package ibverbs_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/monarch-go/monarch/ibverbs"
)

// waker is a helper process: after 300 ms it adds 1 to the word at
// byte 8 of IBVERBS_WAKER's handle.
func waker() int {
	h, ok := helperHandle("IBVERBS_WAKER")
	if !ok {
		return 1
	}
	time.Sleep(300 * time.Millisecond)
	if _, err := h.FetchAdd(context.Background(), 8, 1); err != nil {
		fmt.Println("ERR", err)
		return 1
	}
	fmt.Println("DONE", h.Backend())
	return 0
}

// helperHandle is the handle a helper process finds in the environment
// variable name; if it cannot decode it, it says why on stdout.
func helperHandle(name string) (ibverbs.Handle, bool) {
	var h ibverbs.Handle
	if err := json.Unmarshal([]byte(os.Getenv(name)), &h); err != nil {
		fmt.Println("ERR", err)
		return h, false
	}
	return h, true
}

// startHelper starts the test binary as the helper that the environment
// variable name makes it, on h; its output goes to out.
func startHelper(t *testing.T, name string, h ibverbs.Handle) (cmd *exec.Cmd, out *bytes.Buffer) {
	t.Helper()
	js, _ := json.Marshal(h)
	exe, _ := os.Executable()
	cmd = exec.Command(exe)
	cmd.Env = append(os.Environ(), name+"="+string(js))
	out = new(bytes.Buffer)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd, out
}

// TestWaitWokenByPeer: an owner blocked on a word of its buffer (shared
// memory, or its own registered memory) wakes when another process adds
// to the word, through each backend, long before its timeout.
func TestWaitWokenByPeer(t *testing.T) {
	for _, c := range []struct {
		backend  string
		register bool
	}{{"shm", false}, {"tcp", false}, {"tcp", true}} {
		t.Run(fmt.Sprintf("%s-register=%v", c.backend, c.register), func(t *testing.T) {
			t.Setenv(ibverbs.EnvBackend, c.backend)
			var b *ibverbs.Buffer
			var err error
			if c.register {
				b, err = ibverbs.Register(make([]byte, 64))
			} else {
				b, err = ibverbs.NewBuffer(64)
			}
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			words, _ := ibverbs.View[uint64](b)
			cmd, out := startHelper(t, "IBVERBS_WAKER", b.Handle())
			t0 := time.Now()
			for atomic.LoadUint64(&words[1]) == 0 && time.Since(t0) < 20*time.Second {
				if err := b.Wait(8, 0, 10*time.Second); err != nil {
					t.Fatal(err)
				}
			}
			took := time.Since(t0)
			if err := cmd.Wait(); err != nil || !strings.HasPrefix(out.String(), "DONE "+c.backend) {
				t.Fatalf("waker: %v: %s", err, out)
			}
			if atomic.LoadUint64(&words[1]) != 1 || took > 5*time.Second {
				t.Fatalf("the wait ended after %v with the word at %d, want 1 well before the 10 s timeout", took, words[1])
			}
		})
	}
}

// TestWaitBounds: a wait whose word is not the old value returns at
// once, one that nothing wakes returns at its timeout, and a word out of
// the buffer or a closed buffer fails.
func TestWaitBounds(t *testing.T) {
	b, err := ibverbs.NewBuffer(64)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	if err := b.Wait(0, 7, time.Minute); err != nil || time.Since(t0) > 10*time.Second {
		t.Fatalf("a wait for a word that was not the old value: %v after %v", err, time.Since(t0))
	}
	t0 = time.Now()
	if err := b.Wait(0, 0, 50*time.Millisecond); err != nil || time.Since(t0) < 40*time.Millisecond {
		t.Fatalf("a wait nothing wakes: %v after %v, want its 50 ms", err, time.Since(t0))
	}
	for _, off := range []int{-8, 4, 64} {
		if err := b.Wait(off, 0, time.Millisecond); !errors.Is(err, ibverbs.ErrRange) {
			t.Errorf("a wait at offset %d: %v, want ErrRange", off, err)
		}
	}
	b.Close()
	if err := b.Wait(0, 0, time.Millisecond); !errors.Is(err, ibverbs.ErrClosed) {
		t.Errorf("a wait on a closed buffer: %v, want ErrClosed", err)
	}
}
