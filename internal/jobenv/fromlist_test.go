package jobenv

import (
	"strings"
	"testing"
)

// TestFromList: a proc's contract written by Environ reads back from the
// list alone, whatever this process's own environment says; a bad value
// there is an error naming the variable, as FromEnviron's.
func TestFromList(t *testing.T) {
	want := Env{Job: "j1", Bus: Bus{URL: "nats://127.0.0.1:1", Token: "tok", Leaf: "nats-leaf://127.0.0.1:2", Local: "h1"},
		HostName: "h1", HostBus: true, Proc: &Proc{ID: "h1.c-1", Parent: "c", ReadyPort: 7, ReadyRank: 3, Agent: "h1"}}
	got, err := FromList(append(want.Environ(), "MONARCH_RANK_GPUS=2"))
	if err != nil {
		t.Fatal(err)
	}
	if got.Job != want.Job || got.Bus.URL != want.Bus.URL || got.Bus.Local != "h1" || !got.HostBus || got.HostName != "h1" ||
		*got.Proc != *want.Proc {
		t.Fatalf("FromList gave %+v (proc %+v), want %+v", got, got.Proc, want)
	}
	if _, err := FromList(append(want.Environ(), varReadyPort+"=x")); err == nil || !strings.Contains(err.Error(), varReadyPort) {
		t.Fatalf("a bad ready port: %v, want an error naming %s", err, varReadyPort)
	}
}

// TestSpareFromList: a spare's contract (no parent, no ready port) reads
// back as a spare; a spare with a ready port, or a bad MONARCH_SPARE, is
// an error naming the variable.
func TestSpareFromList(t *testing.T) {
	want := Env{Job: "j1", Bus: Bus{URL: "nats://127.0.0.1:1"}, Proc: &Proc{ID: "h1.s-1", Agent: "h1", Spare: true}}
	got, err := FromList(want.Environ())
	if err != nil {
		t.Fatal(err)
	}
	if *got.Proc != *want.Proc {
		t.Fatalf("FromList gave proc %+v, want %+v", got.Proc, want.Proc)
	}
	if _, err := FromList(append(want.Environ(), varReadyPort+"=7")); err == nil || !strings.Contains(err.Error(), varSpare) {
		t.Fatalf("a spare with a ready port: %v, want an error naming %s", err, varSpare)
	}
	if _, err := FromList(append(want.Environ(), varSpare+"=yes")); err == nil || !strings.Contains(err.Error(), varSpare) {
		t.Fatalf("MONARCH_SPARE=yes: %v, want an error naming %s", err, varSpare)
	}
}
