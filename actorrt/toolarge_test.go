package actorrt_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/monarch-go/monarch/actorrt"
	"github.com/monarch-go/monarch/internal/testenv/alloc"
)

// tooLargeLimit is the largest message of the "toolarge" helper's client.
const tooLargeLimit = 1 << 20

// BigInit takes bytes in Init, for Spawn arguments over the limit.
type BigInit struct{}

func (*BigInit) Init(ctx *actorrt.Context, b []byte) error { return nil }

// remoteLen is a remote function of bytes, for its arguments over the limit.
var remoteLen = actorrt.Remote1("test_len", func(ctx context.Context, b []byte) (int, error) { return len(b), nil })

func init() {
	if err := actorrt.Register[BigInit](); err != nil {
		panic(err)
	}
}

// helperTooLarge is a client whose largest message is tooLargeLimit: it
// sends one byte more than that every way a value leaves a process, and
// prints, for each, the bytes the refused send allocated and its error.
func helperTooLarge() int {
	return actorrt.Run(func(ctx context.Context) error {
		procs, err := actorrt.ThisHost(ctx).SpawnProcs(ctx, actorrt.Dims{{"gpus", 1}})
		if err != nil {
			return err
		}
		echo, err := actorrt.Spawn[Echo](ctx, procs, "big")
		if err != nil {
			return err
		}
		port, recv := actorrt.OpenChannel[[]byte](ctx)
		defer recv.Close()
		// Warm the paths up: the measures should see the refused sends only.
		small := make([]byte, 100)
		actorrt.Method1((*Echo).Digest).CallOne(echo, small).Get(ctx)
		port.Send(small)
		remoteLen.Call(procs, small).Get(ctx)

		arg := make([]byte, tooLargeLimit+1)
		for _, s := range []struct {
			what string
			send func() error
		}{
			{"call", func() error { _, err := actorrt.Method1((*Echo).Digest).CallOne(echo, arg).Get(ctx); return err }},
			{"send", func() error { return port.Send(arg) }},
			{"remote", func() error { _, err := remoteLen.Call(procs, arg).Get(ctx); return err }},
			{"spawn", func() error { _, err := actorrt.Spawn[BigInit](ctx, procs, "big-init", arg); return err }},
		} {
			var err error
			n := alloc.By(func() { err = s.send() })
			fmt.Printf("REFUSED %s %d %v\n", s.what, n, err)
		}
		// Just under the limit, a call goes through.
		_, err = actorrt.Method1((*Echo).Digest).CallOne(echo, make([]byte, tooLargeLimit-1024)).Get(ctx)
		fmt.Printf("FITS %v\n", err)
		return nil
	}, actorrt.WithMaxMessage(tooLargeLimit))
}

// TestTooLargeRefusedBeforeCopy: a value one byte over the largest
// message is refused at once, by a call, a Port.Send, a remote function
// and a Spawn, with the limit in the error, and the refused send allocates
// far less than the value: it was not copied.
func TestTooLargeRefusedBeforeCopy(t *testing.T) {
	cmd := helperCmd(t, "toolarge")
	var out bytes.Buffer
	cmd.Stdout = &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	kill := time.AfterFunc(60*time.Second, func() { cmd.Process.Kill() })
	defer kill.Stop()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("helper: %v\n%s", err, out.String())
	}
	refused := map[string]bool{}
	fits := false
	for sc := bufio.NewScanner(&out); sc.Scan(); {
		f := strings.SplitN(sc.Text(), " ", 4)
		switch {
		case f[0] == "REFUSED" && len(f) == 4:
			refused[f[1]] = true
			n, _ := strconv.ParseUint(f[2], 10, 64)
			msg := f[3]
			if !strings.Contains(msg, "message too large") || !strings.Contains(msg, strconv.Itoa(tooLargeLimit)) {
				t.Errorf("%s: error %q, want one that names the limit of %d", f[1], msg, tooLargeLimit)
			}
			if n > tooLargeLimit/4 {
				t.Errorf("%s: the refused send allocated %d bytes for a value of %d", f[1], n, tooLargeLimit+1)
			}
			t.Logf("%s refused, %d bytes allocated: %s", f[1], n, msg)
		case f[0] == "FITS":
			fits = true
			if sc.Text() != "FITS <nil>" {
				t.Errorf("a call just under the limit: %s", sc.Text())
			}
		}
	}
	for _, what := range []string{"call", "send", "remote", "spawn"} {
		if !refused[what] {
			t.Errorf("no result for %s in the helper's output:\n%s", what, out.String())
		}
	}
	if !fits {
		t.Errorf("no result for the call under the limit:\n%s", out.String())
	}
}
