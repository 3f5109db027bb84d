package ibverbs

import (
	"context"
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestChoose: which backend a handle gets, forced or not, by where its
// owner is, and why none when none.
func TestChoose(t *testing.T) {
	own, err := NewBuffer(1 << 10)
	if err != nil {
		t.Fatal(err)
	}
	defer own.Close()
	here := own.Handle()
	elsewhere := here
	elsewhere.Boot, elsewhere.PID = "boot-id-of-another-host", 1
	cut := elsewhere
	cut.Addr = ""
	gone := here
	gone.PID = deadPID(t)

	for _, tt := range []struct {
		name   string
		forced string
		h      Handle
		want   string   // the backend's name, or "" for an error
		errs   []error  // the error wraps each
		says   []string // and says each
	}{
		{name: "owner here", h: here, want: "shm"},
		{name: "owner on another host", h: elsewhere, want: "tcp"},
		{name: "owner gone: its server says so", h: gone, want: "tcp"},
		{name: "owner on another host, no TCP address", h: cut,
			errs: []error{ErrBackend}, says: []string{"shm: owner on another host", "tcp: the handle has no TCP address"}},
		{name: "forced tcp, owner here", forced: "tcp", h: here, want: "tcp"},
		{name: "forced shm, any case", forced: "SHM", h: here, want: "shm"},
		{name: "forced shm, owner on another host", forced: "shm", h: elsewhere,
			errs: []error{ErrBackend}, says: []string{EnvBackend + "=shm: owner on another host"}},
		{name: "forced shm, owner gone", forced: "shm", h: gone,
			errs: []error{ErrBackend, ErrClosed}, says: []string{"the owner's memory is gone"}},
		{name: "forced unknown name", forced: "rdma", h: here,
			errs: []error{ErrBackend}, says: []string{`"rdma" names no backend`, "valid: " + validNames()}},
		{name: "forced verbs", forced: "verbs", h: here, errs: []error{ErrBackend}, says: verbsSays()},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b, err := choose(tt.forced, tt.h, thisProcess().backends)
			if tt.want != "" {
				if err != nil {
					t.Fatalf("err %v, want %s", err, tt.want)
				}
				if b.name() != tt.want {
					t.Fatalf("chose %s, want %s", b.name(), tt.want)
				}
				return
			}
			if err == nil {
				t.Fatalf("chose %s, want an error", b.name())
			}
			for _, e := range tt.errs {
				if !errors.Is(err, e) {
					t.Errorf("error %q does not wrap %v", err, e)
				}
			}
			for _, s := range tt.says {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not say %q", err, s)
				}
			}
		})
	}
}

// validNames lists the backends of this build, as choose does.
func validNames() string {
	var names []string
	for _, b := range thisProcess().backends {
		names = append(names, b.name())
	}
	return strings.Join(names, ", ")
}

// verbsSays is what forcing verbs on a handle without an rkey says: that
// this build has no such backend, or (built with -tags verbs) why it is
// not used.
func verbsSays() []string {
	if _, ok := compiled["verbs"]; ok {
		return []string{EnvBackend + "=verbs: "}
	}
	return []string{`"verbs" names no backend`, "valid: shm, tcp"}
}

// deadPID is the pid of a process that has exited.
func deadPID(t *testing.T) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	return cmd.Process.Pid
}

// TestBoundOnce: a handle keeps the backend it was bound to at its first
// use, whatever MONARCH_RDMA_BACKEND says later; an unknown name binds
// nothing and every transfer says why.
func TestBoundOnce(t *testing.T) {
	ctx := context.Background()
	b, err := NewBuffer(1 << 10)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	h := b.Handle()

	t.Setenv(EnvBackend, "rdma")
	if got := h.Backend(); got != "none" {
		t.Fatalf("Backend() = %s under an unknown name", got)
	}
	if err := h.ReadInto(ctx, make([]byte, 10)); !errors.Is(err, ErrBackend) || !strings.Contains(err.Error(), "valid: "+validNames()) {
		t.Fatalf("read under an unknown name: %v", err)
	}

	t.Setenv(EnvBackend, "tcp")
	if err := h.ReadInto(ctx, make([]byte, 10)); err != nil {
		t.Fatal(err)
	}
	t.Setenv(EnvBackend, "shm")
	if got := h.Backend(); got != "tcp" {
		t.Fatalf("Backend() = %s after the variable changed, want tcp as bound", got)
	}
	other, err := NewBuffer(1 << 10)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if got := other.Handle().Backend(); got != "shm" {
		t.Fatalf("a new handle: Backend() = %s, want shm", got)
	}
}
