package actorrt_test

import (
	"bytes"
	"crypto/sha256"
	"testing"

	"github.com/monarch-go/monarch/actorrt"
)

// Large payloads travel out of band (past 256 KiB): the bus carries a
// reference and the receiver reads the bytes from the sender's buffer.

// TestLargePayloadsInOrder: broadcasts and calls from one sender, small
// ones and large ones mixed, reach every member in send order with every
// byte in place; results past the bound come back whole.
func TestLargePayloadsInOrder(t *testing.T) {
	inProcess(t)
	ctx := testCtx(t)
	procs := spawnProcs(t, actorrt.Dims{{"procs", 2}})
	rec := spawn[Recorder](t, procs, "large-order")
	note, noteBlob := actorrt.VoidMethod1((*Recorder).Note), actorrt.VoidMethod2((*Recorder).NoteBlob)
	noteCall := actorrt.Method1((*Recorder).NoteCall)
	var calls []*actorrt.Future[int64]
	const n = 60
	for i := int64(0); i < n; i++ {
		var err error
		switch i % 4 {
		case 0:
			err = noteBlob.Broadcast(rec, i, bytes.Repeat([]byte{byte(i)}, 300<<10+int(i)*4096))
		case 1:
			err = noteBlob.Broadcast(rec, i, bytes.Repeat([]byte{byte(i)}, 3<<20))
		case 2:
			calls = append(calls, noteCall.Choose(rec, i))
		default:
			err = note.Broadcast(rec, i)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range calls {
		if _, err := f.Get(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if total, want := seenInOrder(t, ctx, rec), 2*(n-n/4)+n/4; total != want {
		t.Errorf("%d messages seen in all, want %d", total, want)
	}

	echo := spawn[Echo](t, procs.At("procs", 1), "large-echo")
	data := make([]byte, 9<<20+5)
	for i := range data {
		data[i] = byte(i * 31)
	}
	got, err := actorrt.Method1((*Echo).Bytes).CallOne(echo, data).Get(ctx)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("echo of %d bytes: %d back, %v", len(data), len(got), err)
	}
	sum, err := actorrt.Method1((*Echo).Digest).CallOne(echo, data).Get(ctx)
	if err != nil || sum != sha256.Sum256(data) {
		t.Fatalf("digest of %d bytes: %x, %v", len(data), sum, err)
	}
}
