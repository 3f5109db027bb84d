package wire

import (
	"strings"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
)

// TestRespawnProcChecked: a host agent reads a respawn request only with
// both procs' ids, a ready port and a reply port; what it reads is what
// was sent.
func TestRespawnProcChecked(t *testing.T) {
	good := RespawnProcReq{Old: "c-1", New: "c-5", Proc: "c", Port: 4}
	with := func(f func(r *RespawnProcReq)) RespawnProcReq { r := good; f(&r); return r }
	tests := []struct {
		name string
		body any
		port uint64 // the header's
		kind DropKind
		want string // in the error; "" for accepted
	}{
		{"accepted", good, 4, 0, ""},
		{"no reply port", good, 0, DropIDs, "no reply port"},
		{"no old proc", with(func(r *RespawnProcReq) { r.Old = "" }), 4, DropIDs, "respawn of proc"},
		{"a wildcard for the new proc", with(func(r *RespawnProcReq) { r.New = "c-*" }), 4, DropIDs, "respawn of proc"},
		{"a subject for the old proc", with(func(r *RespawnProcReq) { r.Old = "c.>" }), 4, DropIDs, "respawn of proc"},
		{"no ready proc", with(func(r *RespawnProcReq) { r.Proc = "" }), 4, DropIDs, "ready port"},
		{"ready port 0", with(func(r *RespawnProcReq) { r.Port = 0 }), 4, DropIDs, "ready port"},
		{"ids of the wrong type", map[string]any{"old": 1, "new": []int{2}}, 4, DropBody, "body"},
		{"an adopted slot of no mesh", with(func(r *RespawnProcReq) { r.Adopt = &AdoptSlot{Rank: 1} }), 4, DropIDs, "slot 1 of mesh"},
		{"an adopted slot of a negative rank", with(func(r *RespawnProcReq) { r.Adopt = &AdoptSlot{Mesh: "m", Rank: -1} }), 4, DropIDs, "slot -1"},
		{"an adopted slot with a bad variable", with(func(r *RespawnProcReq) { r.Adopt = &AdoptSlot{Mesh: "m", Env: []string{"X"}} }), 4, DropIDs, "NAME=value"},
		{"an adopted slot on a cpu out of range", with(func(r *RespawnProcReq) { r.Adopt = &AdoptSlot{Mesh: "m", CPUs: []int{MaxCPU}} }), 4, DropIDs, "cpu"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			payload, err := msgpack.Marshal(tt.body)
			if err != nil {
				t.Fatal(err)
			}
			f := &Frame{Header: Header{Kind: KindControl, Method: OpRespawnProc, Port: tt.port, ReplyTo: "c", Rank: -1}, Payload: payload}
			body, kind, err := ReadAgentControl(f)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				if got, ok := body.(*RespawnProcReq); !ok || *got != good {
					t.Fatalf("read %#v, want %+v", body, good)
				}
				return
			}
			if err == nil || kind != tt.kind || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("read with %v (drop %s), want a %s drop saying %q", err, kind, tt.kind, tt.want)
			}
		})
	}
	if !OpReplies(OpRespawnProc) {
		t.Error("a respawn is not answered on its port")
	}
}

// TestTakeSlotChecked: a spare reads a slot handed to it only with a
// ready port and well-formed variables, a bounded number of them; a spawn
// asks for a bounded number of spares, and none for a command or wrapped
// procs.
func TestTakeSlotChecked(t *testing.T) {
	h := &Header{Kind: KindControl, Method: OpTakeSlot, ReplyTo: "h1", Rank: -1}
	good := TakeSlotReq{Env: []string{"RANK=3", "EMPTY="}, Proc: "c", Port: 7}
	if err := CheckControl(h, &good); err != nil {
		t.Fatalf("refused %+v: %v", good, err)
	}
	many := make([]string, MaxSlotVars+1)
	for i := range many {
		many[i] = "A=1"
	}
	for _, tt := range []struct {
		name string
		req  TakeSlotReq
		want string
	}{
		{"no ready proc", TakeSlotReq{Port: 7}, "ready port"},
		{"ready port 0", TakeSlotReq{Proc: "c"}, "ready port"},
		{"a subject for the ready proc", TakeSlotReq{Proc: "c.>", Port: 7}, "ready port"},
		{"no '='", TakeSlotReq{Proc: "c", Port: 7, Env: []string{"RANK"}}, "NAME=value"},
		{"no name", TakeSlotReq{Proc: "c", Port: 7, Env: []string{"=3"}}, "NAME=value"},
		{"a NUL", TakeSlotReq{Proc: "c", Port: 7, Env: []string{"RANK=3\x00X=1"}}, "no NUL"},
		{"too many", TakeSlotReq{Proc: "c", Port: 7, Env: many}, "at most"},
	} {
		if err := CheckControl(h, &tt.req); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v, want an error saying %q", tt.name, err, tt.want)
		}
	}
	if err := CheckControl(&Header{Kind: KindControl, Method: OpSlotTaken, Rank: -1}, nil); err == nil {
		t.Error("a slot taken from nobody accepted")
	}
	sp := Header{Kind: KindControl, Method: OpSpawnProcs, Port: 3, ReplyTo: "c", Rank: -1}
	spawn := func(f func(*SpawnProcsReq)) *SpawnProcsReq {
		r := &SpawnProcsReq{IDs: []string{"c-1"}, Ranks: []int{0}, Env: [][]string{nil}, Proc: "c", Port: 3, Spares: 2}
		f(r)
		return r
	}
	if err := CheckControl(&sp, spawn(func(*SpawnProcsReq) {})); err != nil {
		t.Fatalf("2 spares refused: %v", err)
	}
	for _, tt := range []struct {
		name string
		req  *SpawnProcsReq
		want string
	}{
		{"negative", spawn(func(r *SpawnProcsReq) { r.Spares = -1 }), "spares"},
		{"too many", spawn(func(r *SpawnProcsReq) { r.Spares = MaxSpares + 1 }), "spares"},
		{"a command's", spawn(func(r *SpawnProcsReq) { r.Command = []string{"true"} }), "cannot take a rank late"},
		{"wrapped", spawn(func(r *SpawnProcsReq) { r.Wrap = [][]string{{"taskset", "-c", "0"}} }), "cannot take a rank late"},
	} {
		if err := CheckControl(&sp, tt.req); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v, want an error saying %q", tt.name, err, tt.want)
		}
	}
}

// TestReplacedNoticeChecked: a notice of a proc started in an ended one's
// place is taken only with both procs' ids, distinct, the agent's id and
// a pid that is not negative: a slot whose chain loops to itself, or
// leads to a subject, is never recorded.
func TestReplacedNoticeChecked(t *testing.T) {
	good := ReplacedNotice{Old: "c-1", New: "c-5", Agent: "c", Host: "h0", PID: 4242}
	with := func(f func(n *ReplacedNotice)) *ReplacedNotice { n := good; f(&n); return &n }
	h := &Header{Kind: KindControl, Method: OpReplaced, ReplyTo: "c", Rank: -1}
	if err := CheckControl(h, &good); err != nil {
		t.Fatalf("refused %+v: %v", good, err)
	}
	for name, n := range map[string]*ReplacedNotice{
		"no old proc":         with(func(n *ReplacedNotice) { n.Old = "" }),
		"a wildcard for new":  with(func(n *ReplacedNotice) { n.New = "c-*" }),
		"new is old":          with(func(n *ReplacedNotice) { n.New = n.Old }),
		"a subject for agent": with(func(n *ReplacedNotice) { n.Agent = "c.>" }),
		"a negative pid":      with(func(n *ReplacedNotice) { n.PID = -1 }),
	} {
		if err := CheckControl(h, n); err == nil || !strings.Contains(err.Error(), "replaced by") {
			t.Errorf("%s: %+v taken (%v), want it refused", name, *n, err)
		}
	}
}
