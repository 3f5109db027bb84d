package actorrt

import (
	"testing"

	"github.com/monarch-go/monarch/internal/wire"
	"github.com/vmihailenco/msgpack/v5"
)

// nameSeeds are the registry's requests as the runtime writes them.
func nameSeeds() []struct {
	op   string
	body any
} {
	args, _ := msgpack.Marshal([]any{"x"})
	ext, _ := NewExtent(Dims{{"gpus", 2}})
	mesh := actorMeshWire{ID: "c-1.m3", Name: "workers", Type: "pkg.Worker", Region: toRegionWire(wholeRegion(ext)),
		Procs: []string{"c-1", "c-2"}, Agents: []string{"c", "c"}}
	return []struct {
		op   string
		body any
	}{
		{wire.OpNameAdd, &nameAddReq{Mesh: mesh}},
		{wire.OpNameFree, &nameFreeReq{Mesh: "c-1.m3"}},
		{wire.OpLookup, &lookupReq{Name: "workers"}},
		{wire.OpGetOrSpawn, &getOrSpawnReq{Name: "controller", Type: "pkg.Controller", Args: args}},
	}
}

// TestNameControlChecked: the registry's requests are read like every
// control message: a malformed one is dropped, under its kind, before
// the registry sees it.
func TestNameControlChecked(t *testing.T) {
	seeds := nameSeeds()
	add := *seeds[0].body.(*nameAddReq)
	withMesh := func(f func(w *actorMeshWire)) *nameAddReq {
		r := add
		r.Mesh.Procs = append([]string(nil), add.Mesh.Procs...)
		f(&r.Mesh)
		return &r
	}
	tests := []struct {
		name string
		op   string
		body any
		port uint64
		kind wire.DropKind // 0xff: accepted
	}{
		{"nameadd without a reply port", wire.OpNameAdd, &add, 0, wire.DropIDs},
		{"nameadd of mesh \"\"", wire.OpNameAdd, withMesh(func(w *actorMeshWire) { w.ID = "" }), 3, wire.DropIDs},
		{"nameadd of the system actor", wire.OpNameAdd, withMesh(func(w *actorMeshWire) { w.ID = sysMesh }), 3, wire.DropIDs},
		{"nameadd of a bad name", wire.OpNameAdd, withMesh(func(w *actorMeshWire) { w.Name = "a.>" }), 3, wire.DropIDs},
		{"nameadd of no type", wire.OpNameAdd, withMesh(func(w *actorMeshWire) { w.Type = "" }), 3, wire.DropIDs},
		{"nameadd on a wildcard proc", wire.OpNameAdd, withMesh(func(w *actorMeshWire) { w.Procs[1] = "*" }), 3, wire.DropIDs},
		{"nameadd with an agent short", wire.OpNameAdd, withMesh(func(w *actorMeshWire) { w.Agents = w.Agents[:1] }), 3, wire.DropIDs},
		{"nameadd whose region is not its members'", wire.OpNameAdd, withMesh(func(w *actorMeshWire) { w.Procs = append(w.Procs, "c-3"); w.Agents = append(w.Agents, "c") }), 3, wire.DropIDs},
		{"nameadd of a number", wire.OpNameAdd, map[string]any{"mesh": 5}, 3, wire.DropBody},
		{"namefree of \"\"", wire.OpNameFree, &nameFreeReq{}, 0, wire.DropIDs},
		{"lookup without a reply port", wire.OpLookup, &lookupReq{Name: "x"}, 0, wire.DropIDs},
		{"lookup of \"\"", wire.OpLookup, &lookupReq{}, 3, wire.DropIDs},
		{"lookup of a wildcard", wire.OpLookup, &lookupReq{Name: ">"}, 3, wire.DropIDs},
		{"getorspawn of no type", wire.OpGetOrSpawn, &getOrSpawnReq{Name: "c", Args: []byte{0x90}}, 3, wire.DropIDs},
		{"getorspawn of no arguments", wire.OpGetOrSpawn, &getOrSpawnReq{Name: "c", Type: "T"}, 3, wire.DropIDs},
		{"getorspawn of arguments cut short", wire.OpGetOrSpawn, []byte{0x83, 0xa4, 'n', 'a', 'm', 'e', 0xa1, 'c', 0xa4, 't', 'y', 'p', 'e', 0xa1, 'T', 0xa4, 'a', 'r', 'g', 's', 0x92}, 3, wire.DropBody},
	}
	for _, s := range seeds {
		port := uint64(3)
		if s.op == wire.OpNameFree {
			port = 0
		}
		tests = append(tests, struct {
			name string
			op   string
			body any
			port uint64
			kind wire.DropKind
		}{s.op, s.op, s.body, port, 0xff})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body, ok := tt.body.([]byte)
			if !ok {
				var err error
				if body, err = msgpack.Marshal(tt.body); err != nil {
					t.Fatal(err)
				}
			}
			f := &wire.Frame{Header: wire.Header{Kind: wire.KindControl, Method: tt.op, Port: tt.port, ReplyTo: "c-1", Rank: -1}, Payload: body}
			_, kind, err := readControl(f)
			switch {
			case tt.kind == 0xff && err != nil:
				t.Fatalf("refused: %v", err)
			case tt.kind != 0xff && err == nil:
				t.Fatal("accepted")
			case tt.kind != 0xff && kind != tt.kind:
				t.Fatalf("dropped as %s, want %s: %v", kind, tt.kind, err)
			}
		})
	}
}
