//go:build verbs && cgo

package ibverbs_test

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/monarch-go/monarch/ibverbs"
)

// TestVerbs: with an RDMA device, reads, writes and atomics on another
// process's buffer through the verbs backend; without one (these
// machines), the backend says why it is not used, and the test skips with
// that reason.
func TestVerbs(t *testing.T) {
	ctx := context.Background()
	t.Setenv(ibverbs.EnvBackend, "verbs")
	o := startOwner(t)
	got := make([]byte, o.h.Size)
	err := o.h.ReadInto(ctx, got)
	if errors.Is(err, ibverbs.ErrBackend) {
		t.Skipf("the verbs backend is not used here: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	want := make([]byte, o.h.Size)
	pattern(want, 1)
	if !bytes.Equal(got, want) || o.h.Backend() != "verbs" {
		t.Fatalf("RDMA READ: different bytes, or backend %s", o.h.Backend())
	}
	pattern(want, 5)
	if err := o.h.WriteFrom(ctx, want); err != nil {
		t.Fatal(err)
	}
	if s := o.ask(t, "sum"); s != sum(want) {
		t.Fatalf("after an RDMA WRITE the owner holds %s, want %s", s, sum(want))
	}
	if _, err := o.h.FetchAdd(ctx, 8, 1); err != nil {
		t.Fatal(err)
	}
}
