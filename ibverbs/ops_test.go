package ibverbs_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/monarch-go/monarch/ibverbs"
)

// adder is a helper process: IBVERBS_ADDER's handle gets 10,000
// fetch-and-adds of 1 on word 1 and 1,000 increments by compare-and-swap
// on word 2.
func adder() int {
	h, ok := helperHandle("IBVERBS_ADDER")
	if !ok {
		return 1
	}
	ctx := context.Background()
	for range 10000 {
		if _, err := h.FetchAdd(ctx, 8, 1); err != nil {
			fmt.Println("ERR", err)
			return 1
		}
	}
	for range 1000 {
		var v [8]byte
		if err := h.ReadAt(ctx, v[:], 16); err != nil {
			fmt.Println("ERR", err)
			return 1
		}
		for cur := binary.LittleEndian.Uint64(v[:]); ; {
			prev, err := h.CompareAndSwap(ctx, 16, cur, cur+1)
			if err != nil {
				fmt.Println("ERR", err)
				return 1
			}
			if prev == cur {
				break
			}
			cur = prev
		}
	}
	fmt.Println("DONE", h.Backend())
	return 0
}

// TestAtomicsFromManyProcs: 4 processes x 10,000 fetch-and-adds on one
// word, and 4 x 1,000 compare-and-swap increments on another, through
// each backend: the totals are exact.
func TestAtomicsFromManyProcs(t *testing.T) {
	ctx := context.Background()
	eachBackend(t, func(t *testing.T, backend string, o *ownerProc) {
		var before [24]byte
		if err := o.h.ReadAt(ctx, before[:], 0); err != nil {
			t.Fatal(err)
		}
		var adders []*exec.Cmd
		var outs []*bytes.Buffer
		for range 4 {
			cmd, out := startHelper(t, "IBVERBS_ADDER", o.h)
			adders, outs = append(adders, cmd), append(outs, out)
		}
		for i, cmd := range adders {
			if err := cmd.Wait(); err != nil || !strings.HasPrefix(outs[i].String(), "DONE "+backend) {
				t.Fatalf("adder %d: %v: %s", i, err, outs[i])
			}
		}
		var after [24]byte
		if err := o.h.ReadAt(ctx, after[:], 0); err != nil {
			t.Fatal(err)
		}
		word := func(b []byte, i int) uint64 { return binary.LittleEndian.Uint64(b[8*i:]) }
		if got, want := word(after[:], 1)-word(before[:], 1), uint64(40000); got != want {
			t.Errorf("fetch-and-add: the word grew by %d, want %d", got, want)
		}
		if got, want := word(after[:], 2)-word(before[:], 2), uint64(4000); got != want {
			t.Errorf("compare-and-swap: the word grew by %d, want %d", got, want)
		}
		if !bytes.Equal(after[:8], before[:8]) {
			t.Errorf("word 0 changed: %x -> %x", before[:8], after[:8])
		}
		for _, off := range []int{4, o.h.Size - 4, o.h.Size, -8} {
			if _, err := o.h.FetchAdd(ctx, off, 1); !errors.Is(err, ibverbs.ErrRange) {
				t.Errorf("an atomic at offset %d: %v, want ErrRange", off, err)
			}
		}
	})
}

// TestViews: a buffer seen as []float64 and []float32 is its bytes, read
// and written at element offsets from another process; a type whose
// size does not divide the buffer is refused.
func TestViews(t *testing.T) {
	ctx := context.Background()
	b, err := ibverbs.NewBuffer(1 << 12)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	f64, err := ibverbs.View[float64](b)
	if err != nil || len(f64) != 512 {
		t.Fatalf("View[float64]: %d, %v", len(f64), err)
	}
	for i := range f64 {
		f64[i] = float64(i) / 4
	}
	got := make([]float64, 10)
	if err := b.Handle().ReadAt(ctx, ibverbs.Bytes(got), 8*100); err != nil {
		t.Fatal(err)
	}
	for i, v := range got {
		if v != float64(100+i)/4 {
			t.Fatalf("element %d: %v", 100+i, v)
		}
	}
	if err := b.Handle().WriteAt(ctx, ibverbs.Bytes([]float64{-1, -2}), 8*510); err != nil || f64[510] != -1 || f64[511] != -2 {
		t.Fatalf("write of the last two elements: %v, %v", err, f64[510:])
	}
	odd, err := ibverbs.NewBuffer(1001)
	if err != nil {
		t.Fatal(err)
	}
	defer odd.Close()
	if _, err := ibverbs.View[float32](odd); !errors.Is(err, ibverbs.ErrRange) || !strings.Contains(err.Error(), "1001 bytes") {
		t.Errorf("View[float32] of 1001 bytes: %v", err)
	}
	if v, err := ibverbs.View[uint8](odd); err != nil || len(v) != 1001 {
		t.Errorf("View[uint8] of 1001 bytes: %d %v", len(v), err)
	}
}

// TestRegister: memory the program has, registered, is read and written
// by another process in place (no copy: the owner's later writes show);
// on the same host that goes through tcp, and the shm backend says why.
func TestRegister(t *testing.T) {
	ctx := context.Background()
	t.Setenv("IBVERBS_REGISTER", "1")
	o := startOwner(t)
	if got := o.h.Backend(); got != "tcp" {
		t.Fatalf("Backend() of registered memory in another process: %s, want tcp", got)
	}
	// Forced to shm: the reason. (o.h is bound to tcp in this process
	// already; a handle that differs is bound afresh.)
	t.Setenv(ibverbs.EnvBackend, "shm")
	fresh := o.h
	fresh.Size--
	var buf [16]byte
	if err := fresh.ReadInto(ctx, buf[:]); !errors.Is(err, ibverbs.ErrBackend) || !strings.Contains(err.Error(), "not shared memory") {
		t.Errorf("forced shm on registered memory: %v", err)
	}
	t.Setenv(ibverbs.EnvBackend, "")
	want := make([]byte, o.h.Size)
	pattern(want, 1)
	got := make([]byte, o.h.Size)
	if err := o.h.ReadInto(ctx, got); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("read of registered memory: %v", err)
	}
	if o.ask(t, "poke") != "POKED" {
		t.Fatal("owner did not poke")
	}
	if err := o.h.ReadInto(ctx, got[:1]); err != nil || got[0] != want[0]^0xff {
		t.Fatalf("after the owner wrote its own slice: %x (%v), want %x", got[0], err, want[0]^0xff)
	}
	if _, err := ibverbs.Register(nil); !errors.Is(err, ibverbs.ErrRange) {
		t.Errorf("Register(nil): %v", err)
	}
}

// TestBatch: writes and reads submitted together, to another process's
// buffer through each backend, all done when Do returns; a failing op is
// named by its index.
func TestBatch(t *testing.T) {
	ctx := context.Background()
	eachBackend(t, func(t *testing.T, _ string, o *ownerProc) {
		var ops []ibverbs.Op
		for i := range 8 {
			ops = append(ops, ibverbs.Op{Handle: o.h, Off: i * 1000, Local: bytes.Repeat([]byte{byte(i + 1)}, 1000), Write: true})
		}
		if err := ibverbs.Do(ctx, ops...); err != nil {
			t.Fatal(err)
		}
		reads := make([]ibverbs.Op, 8)
		for i := range reads {
			reads[i] = ibverbs.Op{Handle: o.h, Off: i * 1000, Local: make([]byte, 1000)}
		}
		if err := ibverbs.Do(ctx, reads...); err != nil {
			t.Fatal(err)
		}
		for i, r := range reads {
			if !bytes.Equal(r.Local, ops[i].Local) {
				t.Fatalf("op %d read back different bytes", i)
			}
		}
		bad := append(reads[:2:2], ibverbs.Op{Handle: o.h, Off: o.h.Size, Local: make([]byte, 1)})
		if err := ibverbs.Do(ctx, bad...); !errors.Is(err, ibverbs.ErrRange) || !strings.Contains(err.Error(), "op 2:") {
			t.Errorf("a batch with an op out of range: %v", err)
		}
	})
}

// TestParallelStreams: a transfer large enough to be cut into parts on
// parallel connections arrives whole, both ways.
func TestParallelStreams(t *testing.T) {
	ctx := context.Background()
	t.Setenv(ibverbs.EnvBackend, "tcp")
	t.Setenv(ibverbs.EnvTCPStreams, "3")
	o := startOwnerSize(t, 32<<20+5)
	want := make([]byte, o.h.Size)
	pattern(want, 1)
	got := make([]byte, o.h.Size)
	if err := o.h.ReadInto(ctx, got); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("a 32 MiB read in 3 parts: %v", err)
	}
	pattern(want, 9)
	if err := o.h.WriteFrom(ctx, want); err != nil {
		t.Fatal(err)
	}
	if s := o.ask(t, "sum"); s != sum(want) {
		t.Fatalf("after a 32 MiB write in 3 parts the owner holds %s, want %s", s, sum(want))
	}
}

// TestTLS: when the job's bus uses TLS, an owner serves its buffers with
// TLS and its handles pin its certificate: a reader gets the bytes; a
// handle that pins another certificate, or none, gets nothing.
func TestTLS(t *testing.T) {
	ctx := context.Background()
	t.Setenv("MONARCH_BUS_TLS_CA", "/the/job/ca.pem") // what a proc of a TLS job has
	t.Setenv(ibverbs.EnvBackend, "tcp")
	o := startOwner(t)
	if len(o.h.TLS) != 64 {
		t.Fatalf("the handle pins %q, want a SHA-256", o.h.TLS)
	}
	want := make([]byte, o.h.Size)
	pattern(want, 1)
	got := make([]byte, o.h.Size)
	if err := o.h.ReadInto(ctx, got); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("a read over TLS: %v", err)
	}
	wrong := o.h
	wrong.TLS = strings.Repeat("0", 64)
	if err := wrong.ReadInto(ctx, got[:10]); err == nil || !strings.Contains(err.Error(), "presented a certificate") {
		t.Errorf("a handle pinning another certificate: %v", err)
	}
	plain := o.h
	plain.TLS = ""
	tctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := plain.ReadInto(tctx, got[:10]); err == nil {
		t.Error("a plain TCP read from a TLS server succeeded")
	}
}
