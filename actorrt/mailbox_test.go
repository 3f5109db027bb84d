package actorrt_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/monarch-go/monarch/actorrt"
)

// Stall holds its mailbox: Hold waits until release is closed.
type Stall struct{ seen int }

var release = make(chan struct{})

func (s *Stall) Hold(ctx *actorrt.Context) error {
	select {
	case <-release:
	case <-time.After(30 * time.Second):
	}
	return nil
}

func (s *Stall) Note(ctx *actorrt.Context) error        { s.seen++; return nil }
func (s *Stall) Seen(ctx *actorrt.Context) (int, error) { return s.seen, nil }

// helperMailbox floods two actors, in a client whose mailboxes hold at
// most 50 messages, while they are busy: calls past the bound fail at
// once and the actor lives; a Broadcast past it fails the actor, and the
// fault hook hears why. It prints what it saw.
func helperMailbox() int {
	failed := make(chan *actorrt.MeshFailure, 8)
	return actorrt.Run(func(ctx context.Context) error {
		hold, note, seen := actorrt.VoidMethod((*Stall).Hold), actorrt.VoidMethod((*Stall).Note), actorrt.Method((*Stall).Seen)
		calls, err := actorrt.Spawn[Stall](ctx, actorrt.ThisProc(ctx), "calls")
		if err != nil {
			return err
		}
		if err := hold.Broadcast(calls); err != nil {
			return err
		}
		var futures []*actorrt.Future[actorrt.Void]
		for range 60 {
			futures = append(futures, note.CallOne(calls))
		}
		refused := 0
		for _, f := range futures[:50] {
			select {
			case <-f.Done():
				return errors.New("a call within the bound finished while the actor was held")
			default:
			}
		}
		for _, f := range futures[50:] {
			cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			_, err := f.Get(cctx)
			cancel()
			if errors.Is(err, actorrt.ErrMailboxFull) {
				refused++
			}
		}
		fmt.Println("REFUSED", refused)
		close(release)
		for _, f := range futures[:49] {
			if _, err := f.Get(ctx); err != nil {
				return fmt.Errorf("a call within the bound: %w", err)
			}
		}
		n, err := seen.CallOne(calls).Get(ctx)
		if err != nil {
			return err
		}
		fmt.Println("SEEN", n)

		flood, err := actorrt.Spawn[Stall](ctx, actorrt.ThisProc(ctx), "flood")
		if err != nil {
			return err
		}
		release = make(chan struct{})
		if err := hold.Broadcast(flood); err != nil {
			return err
		}
		for range 60 {
			if err := note.Broadcast(flood); err != nil {
				return err
			}
		}
		select {
		case f := <-failed:
			fmt.Println("FAILURE", f.Mesh, f.Reason)
		case <-time.After(20 * time.Second):
			return errors.New("the flood's failure did not reach the hook")
		}
		close(release)
		return nil
	}, actorrt.WithMailboxLimit(50, 1<<20), actorrt.WithFaultHook(func(f *actorrt.MeshFailure) error {
		failed <- f
		return nil
	}))
}

// TestMailboxBound: see helperMailbox.
func TestMailboxBound(t *testing.T) {
	cmd := helperCmd(t, "mailbox")
	cmd.Stderr = nil
	out, err := runBounded(cmd, time.Minute)
	if err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	for _, want := range []string{
		"REFUSED 10\n",   // the calls past the bound, at once
		"SEEN 49\n",      // 50 waiting: the Hold and 49 Notes
		"FAILURE flood ", // the Broadcast past the bound
		"mailbox full",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// runBounded runs cmd, killing it after d, and returns its output.
func runBounded(cmd *exec.Cmd, d time.Duration) (string, error) {
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		return "", err
	}
	timer := time.AfterFunc(d, func() { cmd.Process.Kill() })
	defer timer.Stop()
	err := cmd.Wait()
	return out.String(), err
}
