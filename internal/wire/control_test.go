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
