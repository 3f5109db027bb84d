package wire

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
)

// TestRunRoundTrip: a run of messages, some repeating the header before
// them, reads back as the same headers and payloads, with the repeated
// headers written once.
func TestRunRoundTrip(t *testing.T) {
	var w RunWriter
	hs := []Header{
		{Kind: KindActor, Target: "c.m1", Method: "Hit", Rank: -1},
		{Kind: KindActor, Target: "c.m1", Method: "Hit", Rank: -1},
		{Kind: KindPort, Port: 7, ReplyTo: "c-1", Rank: 3, Region: []int{0, 2, 1}},
		{Kind: KindActor, Target: "c.m1", Method: "Hit", Rank: -1},
		{Kind: KindActor, Target: "c.m1", Method: "Hit", Rank: -1},
	}
	for i := range hs {
		w.Add(&hs[i], [][]byte{[]byte(fmt.Sprint("payload ", i)), []byte("!")})
	}
	if w.Count() != len(hs) {
		t.Fatalf("count %d", w.Count())
	}
	n, err := CountRun(w.Bytes())
	if err != nil || n != len(hs) {
		t.Fatalf("CountRun: %d, %v", n, err)
	}
	r := ReadRun(w.Bytes())
	for i := range hs {
		f, ok, err := r.Next()
		if !ok || err != nil {
			t.Fatalf("message %d: ok %v, %v", i, ok, err)
		}
		if f.Kind != hs[i].Kind || f.Target != hs[i].Target || f.Port != hs[i].Port || f.Rank != hs[i].Rank || len(f.Region) != len(hs[i].Region) {
			t.Errorf("message %d: header %+v, want %+v", i, f.Header, hs[i])
		}
		if want := fmt.Sprint("payload ", i, "!"); string(f.Payload) != want {
			t.Errorf("message %d: payload %q, want %q", i, f.Payload, want)
		}
	}
	if _, ok, _ := r.Next(); ok {
		t.Error("a message past the end")
	}
	// Headers 1 and 4 repeat the one before: written as one byte each,
	// so the header of Hit is written for messages 0 and 3 only.
	if n := bytes.Count(w.Bytes(), []byte("Hit")); n != 2 {
		t.Errorf("the header of Hit written %d times, want 2", n)
	}
	w.Reset(1 << 20)
	if w.Count() != 0 || w.Len() != 0 {
		t.Error("Reset left a run")
	}
}

// TestRunRefusesBadFraming: cut, padded, empty and headerless runs are
// errors before anything is read.
func TestRunRefusesBadFraming(t *testing.T) {
	var w RunWriter
	w.Add(&Header{Kind: KindActor, Target: "m", Method: "M", Rank: -1}, [][]byte{{0x90}})
	good := bytes.Clone(w.Bytes())
	for name, b := range map[string][]byte{
		"empty":          {},
		"cut":            good[:len(good)-1],
		"padded":         append(bytes.Clone(good), 0),
		"repeats first":  {0, 1, 0x90},
		"huge header":    {0xff, 0xff, 0x03},
		"length past it": {5, 1},
	} {
		if _, err := CountRun(b); !errors.Is(err, ErrDecode) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// FuzzRun: any bytes as a run's payload: CountRun and Next never panic,
// and what Next reads is as many messages as CountRun counted.
func FuzzRun(f *testing.F) {
	var w RunWriter
	w.Add(&Header{Kind: KindActor, Target: "c.m1", Method: "Hit", Rank: -1}, [][]byte{{0x91, 1}})
	w.Add(&Header{Kind: KindActor, Target: "c.m1", Method: "Hit", Rank: -1}, [][]byte{{0x91, 2}})
	w.Add(&Header{Kind: KindPort, Port: 9, ReplyTo: "c", Rank: 0}, [][]byte{{0xc0}})
	f.Add(bytes.Clone(w.Bytes()))
	f.Add([]byte{0, 0})
	f.Add([]byte{1, 0x93, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		n, err := CountRun(b)
		if err != nil {
			return
		}
		r := ReadRun(b)
		got := 0
		for {
			_, ok, _ := r.Next()
			if !ok {
				break
			}
			got++
		}
		if got != n {
			t.Fatalf("counted %d, read %d", n, got)
		}
	})
}

// FuzzTransport: any bytes as a NAK's span or an acknowledgement's body:
// an error or values within their bounds, never a panic.
func FuzzTransport(f *testing.F) {
	f.Add(AppendSpan(nil, Span{3, 9}))
	f.Add(AppendAcks(nil, &Acks{Keys: []string{"proc.c-1", "mesh.c.m2"}, Seqs: []uint64{5, 1 << 40}}))
	f.Add([]byte{0xdd, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		if s, err := ReadSpan(b); err == nil && (s.Lo == 0 || s.Lo > s.Hi) {
			t.Fatalf("span %d..%d", s.Lo, s.Hi)
		}
		if a, err := ReadAcks(b); err == nil {
			if len(a.Keys) != len(a.Seqs) || len(a.Keys) > MaxAcks {
				t.Fatalf("%d keys, %d numbers", len(a.Keys), len(a.Seqs))
			}
			for _, k := range a.Keys {
				if !ValidKey(k) {
					t.Fatalf("key %q", k)
				}
			}
		}
	})
}
