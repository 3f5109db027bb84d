package actorrt_test

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"github.com/monarch-go/monarch/ibverbs"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/monarch-go/monarch/actorrt"
	"github.com/vmihailenco/msgpack/v5"
)

type Counter struct{ value int }

func (c *Counter) Init(ctx *actorrt.Context, initial int) error { c.value = initial; return nil }
func (c *Counter) Increment(ctx *actorrt.Context) error         { c.value++; return nil }
func (c *Counter) Add(ctx *actorrt.Context, n int) (int, error) { c.value += n; return c.value, nil }
func (c *Counter) GetValue(ctx *actorrt.Context) (int, error)   { return c.value, nil }

// Recorder checks the order in which messages reach it.
type Recorder struct {
	seen  []int64
	count int
}

// Note records a sequence number sent by Broadcast.
func (r *Recorder) Note(ctx *actorrt.Context, seq int64) error {
	r.seen = append(r.seen, seq)
	return nil
}

// NoteCall records a sequence number sent by Call and echoes it.
func (r *Recorder) NoteCall(ctx *actorrt.Context, seq int64) (int64, error) {
	r.seen = append(r.seen, seq)
	return seq, nil
}

// NoteBlob records a sequence number sent with a blob, every byte of
// which must be the number's low byte.
func (r *Recorder) NoteBlob(ctx *actorrt.Context, seq int64, blob []byte) error {
	for i, b := range blob {
		if b != byte(seq) {
			return fmt.Errorf("blob %d: byte %d of %d is %d", seq, i, len(blob), b)
		}
	}
	r.seen = append(r.seen, seq)
	return nil
}

func (r *Recorder) Seen(ctx *actorrt.Context) ([]int64, error) { return r.seen, nil }

// Hit counts one-way messages, for the throughput benchmark.
func (r *Recorder) Hit(ctx *actorrt.Context) error          { r.count++; return nil }
func (r *Recorder) Count(ctx *actorrt.Context) (int, error) { return r.count, nil }

// HitData counts one-way messages that carry bytes.
func (r *Recorder) HitData(ctx *actorrt.Context, p []byte) error { r.count++; return nil }

// Echo answers with what it got, and shows where it ran.
type Echo struct{}

func (e *Echo) Ping(ctx *actorrt.Context) (int, error)             { return 1, nil }
func (e *Echo) Say(ctx *actorrt.Context, s string) (string, error) { return s, nil }
func (e *Echo) Where(ctx *actorrt.Context) (string, error) {
	return fmt.Sprintf("%v %v", ctx.ActorInstance().Rank(), ctx.MessageRank()), nil
}
func (e *Echo) Digest(ctx *actorrt.Context, b []byte) ([32]byte, error) { return sha256.Sum256(b), nil }
func (e *Echo) Bytes(ctx *actorrt.Context, b []byte) ([]byte, error)    { return b, nil }
func (e *Echo) Fail(ctx *actorrt.Context, msg string) error             { return errors.New(msg) }
func (e *Echo) Panic(ctx *actorrt.Context) error                        { panic("boom") }
func (e *Echo) Take(ctx *actorrt.Context, p Picky) error                { return nil }

// Picky encodes fine but refuses to decode: an argument that cannot be
// decoded on arrival.
type Picky struct{}

func (Picky) EncodeMsgpack(e *msgpack.Encoder) error  { return e.EncodeString("picky") }
func (*Picky) DecodeMsgpack(d *msgpack.Decoder) error { return errors.New("picky refuses to decode") }

// Gate blocks Wait until Open is called on another Gate in the same proc:
// it deadlocks unless actors of one proc run concurrently.
type Gate struct{}

var gateOpen = make(chan struct{})

func (g *Gate) Wait(ctx *actorrt.Context) (bool, error) {
	select {
	case <-gateOpen:
		return true, nil
	case <-time.After(20 * time.Second):
		return false, nil
	}
}

func (g *Gate) Open(ctx *actorrt.Context) error { close(gateOpen); return nil }

// Sleeper measures how many of its own messages run at once.
type Sleeper struct{}

var sleeperActive, sleeperMax atomic.Int32
var sleeperMu sync.Mutex

// Init takes no arguments.
func (s *Sleeper) Init(ctx *actorrt.Context) error { return nil }

func (s *Sleeper) Nap(ctx *actorrt.Context) error {
	n := sleeperActive.Add(1)
	sleeperMu.Lock()
	if n > sleeperMax.Load() {
		sleeperMax.Store(n)
	}
	sleeperMu.Unlock()
	time.Sleep(time.Millisecond)
	sleeperActive.Add(-1)
	return nil
}

func (s *Sleeper) Max(ctx *actorrt.Context) (int32, error) { return sleeperMax.Load(), nil }

// Bad actor types, refused at Register.
type BadResult struct{}

func (b *BadResult) Get(ctx *actorrt.Context) int { return 1 }

type BadParam struct{}

func (b *BadParam) Take(ctx *actorrt.Context, ch chan int) error { return nil }

type BadInterface struct{}

func (b *BadInterface) Take(ctx *actorrt.Context, v any) error { return nil }

type BadInit struct{}

func (b *BadInit) Init(ctx *actorrt.Context) (int, error) { return 0, nil }

type NeverRegistered struct{}

func (n *NeverRegistered) Ping(ctx *actorrt.Context) (int, error) { return 1, nil }

func (e *Echo) PID(ctx *actorrt.Context) (int, error) { return os.Getpid(), nil }

// Scribble sums the bytes it got, then overwrites them.
func (e *Echo) Scribble(ctx *actorrt.Context, b []byte) (int, error) {
	sum := 0
	for i := range b {
		sum += int(b[i])
		b[i] = 0xff
	}
	return sum, nil
}

// Len answers how many bytes it got and their last: what a receiver of a
// large argument does at the least.
func (e *Echo) Len(ctx *actorrt.Context, b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	return len(b) + int(b[len(b)-1]), nil
}

// ReadLen reads a buffer's bytes into memory of its own, as a large
// argument's receiver does, and answers as Len.
func (e *Echo) ReadLen(ctx *actorrt.Context, h ibverbs.Handle) (int, error) {
	b := make([]byte, h.Size)
	if err := h.ReadInto(ctx, b); err != nil {
		return 0, err
	}
	return e.Len(ctx, b)
}
