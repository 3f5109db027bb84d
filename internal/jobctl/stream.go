package jobctl

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"sync"
	"syscall"
	"time"
)

// Streaming ops. An op whose answer comes after a while of things to
// tell (`monarch exec`: the output of a command on many hosts) sends
// events before it: lines {"event": ...}, then its answer as any op's.
// The caller asks the op to end early by closing its side of the
// connection for writing (shutdown SHUT_WR): the op's context ends, and
// it still answers, with what it did until then; a caller that goes
// away altogether ends it the same way.

// StreamHandler runs a streaming op on its request's body. send writes
// one event (encoded as JSON) to the caller, at once, within IOTimeout;
// it is safe for concurrent use, and must not be called once the handler
// has returned. ctx ends at the op's bound, when the server closes, or
// when the caller asks the op to end (or goes away).
type StreamHandler func(ctx context.Context, body json.RawMessage, send func(event any) error) (any, error)

// serveStream runs a streaming op on connection c, whose request has
// been read; cancel ends ctx.
func serveStream(ctx context.Context, cancel context.CancelFunc, c *net.UnixConn, h StreamHandler, body json.RawMessage) (any, error) {
	go func() {
		// Nothing more is to come from the caller: its EOF (or the
		// connection's end) asks the op to end.
		var b [512]byte
		for {
			if _, err := c.Read(b[:]); err != nil {
				cancel()
				return
			}
		}
	}()
	var mu sync.Mutex
	send := func(event any) error {
		ev, err := json.Marshal(event)
		if err != nil {
			return err
		}
		line, err := json.Marshal(answer{Event: ev})
		if err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		c.SetWriteDeadline(time.Now().Add(IOTimeout))
		_, err = c.Write(append(line, '\n'))
		return err
	}
	return h(ctx, body, send)
}

// CallStream is Call for an op that may send events before its answer
// (Op.Stream): onEvent gets each, in order, as it comes (an error it
// returns ends the call with that error). Once stop is closed (nil:
// never) the op is asked to end, and its answer is still awaited. ctx
// bounds the whole exchange.
func CallStream(ctx context.Context, path, op string, req any, stop <-chan struct{}, onEvent func(json.RawMessage) error, resp any) error {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ECONNREFUSED) {
			return fmt.Errorf("%w at %s", ErrNotServing, path)
		}
		return fmt.Errorf("jobctl: %w", err)
	}
	c := conn.(*net.UnixConn)
	defer c.Close()
	if err := checkPeer(c); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	stopDeadline := context.AfterFunc(ctx, func() { c.SetDeadline(time.Now()) })
	defer stopDeadline()
	body, err := json.Marshal(req)
	if err != nil {
		return fmt.Errorf("jobctl: %s request: %w", op, err)
	}
	line, err := json.Marshal(request{Op: op, Body: body})
	if err != nil {
		return fmt.Errorf("jobctl: %s request: %w", op, err)
	}
	if len(line) > MaxRequest {
		return fmt.Errorf("%w: %s request of %d bytes; the bound is %d", ErrTooLarge, op, len(line), MaxRequest)
	}
	if _, err := c.Write(append(line, '\n')); err != nil {
		return fmt.Errorf("jobctl: %s: %w", op, wrapCtx(ctx, err))
	}
	if stop != nil {
		done := make(chan struct{})
		defer close(done)
		go func() {
			select {
			case <-stop:
				c.CloseWrite()
			case <-done:
			}
		}()
	}
	br := bufio.NewReaderSize(c, 64<<10) // kept across lines: readLine reads through it
	for {
		out, err := readLine(br, MaxAnswer)
		if err != nil {
			return fmt.Errorf("jobctl: %s answer: %w", op, wrapCtx(ctx, err))
		}
		var a answer
		if err := json.Unmarshal(out, &a); err != nil {
			return fmt.Errorf("jobctl: %s answer: %w", op, err)
		}
		if a.Event != nil {
			if onEvent == nil {
				return fmt.Errorf("jobctl: %s: an event, from an op that was not expected to send any", op)
			}
			if err := onEvent(a.Event); err != nil {
				return err
			}
			continue
		}
		if a.Error != "" {
			return errors.New(a.Error)
		}
		if resp == nil {
			return nil
		}
		if err := json.Unmarshal(a.Body, resp); err != nil {
			return fmt.Errorf("jobctl: %s answer: %w", op, err)
		}
		return nil
	}
}
