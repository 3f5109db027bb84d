package jobctl

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// TestCallStream: a streaming op's events come before its answer, in
// order; a caller that closes stop ends the op's context, and still gets
// its answer; a plain Call of a streaming op is an error, not a hang.
func TestCallStream(t *testing.T) {
	path := SocketPath(t.TempDir(), "job1")
	s, err := Listen(path, map[string]Op{
		"count": {Stream: func(ctx context.Context, body json.RawMessage, send func(any) error) (any, error) {
			var n int
			if err := json.Unmarshal(body, &n); err != nil {
				return nil, err
			}
			for i := range n {
				if err := send(i); err != nil {
					return nil, err
				}
			}
			return "counted", nil
		}},
		"wait": {Stream: func(ctx context.Context, body json.RawMessage, send func(any) error) (any, error) {
			if err := send("waiting"); err != nil {
				return nil, err
			}
			<-ctx.Done() // the caller's stop
			return "stopped", nil
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	var got []int
	var ans string
	err = CallStream(ctx, path, "count", 1000, nil, func(ev json.RawMessage) error {
		var i int
		err := json.Unmarshal(ev, &i)
		got = append(got, i)
		return err
	}, &ans)
	if err != nil || ans != "counted" || len(got) != 1000 {
		t.Fatalf("count: %d events, answer %q, %v", len(got), ans, err)
	}
	for i, v := range got {
		if v != i {
			t.Fatalf("event %d is %d", i, v)
		}
	}

	stop := make(chan struct{})
	err = CallStream(ctx, path, "wait", nil, stop, func(ev json.RawMessage) error {
		close(stop) // once the op runs
		return nil
	}, &ans)
	if err != nil || ans != "stopped" {
		t.Errorf("wait, stopped: answer %q, %v", ans, err)
	}

	if err := Call(ctx, path, "count", 1, nil); err == nil || !strings.Contains(err.Error(), "an event") {
		t.Errorf("Call of a streaming op: %v", err)
	}
}

// TestExecOutput: lines are prefixed by their host, pieces of a line
// wait for its end, the streams go apart, a drop is said, and Flush ends
// what is left.
func TestExecOutput(t *testing.T) {
	var out, errs strings.Builder
	o := &ExecOutput{Stdout: &out, Stderr: &errs}
	o.Write(ExecEvent{Host: "h0", Stream: 1, Data: []byte("a\nb")})
	o.Write(ExecEvent{Host: "h1", Stream: 1, Data: []byte("x\n")})
	o.Write(ExecEvent{Host: "h0", Stream: 1, Data: []byte("c\nd")})
	o.Write(ExecEvent{Host: "h1", Stream: 2, Data: []byte("e\n")})
	o.Write(ExecEvent{Host: "h1", Stream: 2, Dropped: 10})
	o.Flush()
	if want := "[h0] a\n[h1] x\n[h0] bc\n[h0] d\n"; out.String() != want {
		t.Errorf("stdout %q, want %q", out.String(), want)
	}
	if want := "[h1] e\n[h1] (10 bytes of output dropped: they came faster than they were read)\n"; errs.String() != want {
		t.Errorf("stderr %q, want %q", errs.String(), want)
	}
	a := &ExecAnswer{Hosts: []ExecHost{{Host: "h0", Status: 0}, {Host: "h1", Status: 3}, {Host: "h2", Status: -1}}}
	if c := a.ExitCode(); c != 3 {
		t.Errorf("ExitCode %d, want 3", c)
	}
}
