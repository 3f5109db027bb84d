package actorrt

import (
	"testing"

	"github.com/monarch-go/monarch/internal/wire"
	"github.com/vmihailenco/msgpack/v5"
)

// TestControlChecked: control messages with empty or invalid ids are
// refused before they act, under the kind of drop they are.
func TestControlChecked(t *testing.T) {
	spawn := spawnReq{Mesh: "c.m1", Name: "n", Type: "T", Dims: Dims{{"a", 2}}, Ranks: []int{1}, Owner: "c"}
	with := func(f func(r *spawnReq)) *spawnReq { r := spawn; f(&r); return &r }
	tests := []struct {
		name string
		op   string
		body any
		port uint64
		kind wire.DropKind // 0xff: accepted
	}{
		{"spawn", wire.OpSpawn, &spawn, 3, 0xff},
		{"spawn without a reply port", wire.OpSpawn, &spawn, 0, wire.DropIDs},
		{"spawn of mesh \"\"", wire.OpSpawn, with(func(r *spawnReq) { r.Mesh = "" }), 3, wire.DropIDs},
		{"spawn over the system actor", wire.OpSpawn, with(func(r *spawnReq) { r.Mesh = sysMesh }), 3, wire.DropIDs},
		{"spawn with a wildcard owner", wire.OpSpawn, with(func(r *spawnReq) { r.Owner = ">" }), 3, wire.DropIDs},
		{"spawn whose extent overflows", wire.OpSpawn, with(func(r *spawnReq) { r.Dims = Dims{{"a", 1 << 32}, {"b", 1 << 32}} }), 3, wire.DropIDs},
		{"spawn whose extent is past the bound", wire.OpSpawn, with(func(r *spawnReq) { r.Dims = Dims{{"a", 1 << 20}, {"b", 1 << 11}} }), 3, wire.DropIDs},
		{"spawn of a rank outside its extent", wire.OpSpawn, with(func(r *spawnReq) { r.Ranks = []int{2} }), 3, wire.DropIDs},
		{"meshinfo", wire.OpMeshInfo, &meshInfoReq{Mesh: "c.m1"}, 3, 0xff},
		{"meshinfo without a reply port", wire.OpMeshInfo, &meshInfoReq{Mesh: "c.m1"}, 0, wire.DropIDs},
		{"meshinfo of \"\"", wire.OpMeshInfo, &meshInfoReq{}, 3, wire.DropIDs},
		{"ended", wire.OpEnded, &wire.EndedReq{IDs: []string{"c-1"}}, 3, 0xff},
		{"ended of a wildcard", wire.OpEnded, &wire.EndedReq{IDs: []string{"*"}}, 3, wire.DropIDs},
		{"spawn of a rank twice", wire.OpSpawn, with(func(r *spawnReq) { r.Ranks = []int{1, 1} }), 3, wire.DropIDs},
		{"spawn of no rank", wire.OpSpawn, with(func(r *spawnReq) { r.Ranks = nil }), 3, wire.DropIDs},
		{"stop", wire.OpStop, &stopReq{Mesh: "c.m1"}, 0, 0xff},
		{"restart", wire.OpRestart, &restartReq{Mesh: "c.m1", Ranks: []int{0, 2}}, 3, 0xff},
		{"give up", wire.OpRestart, &restartReq{Mesh: "c.m1", Ranks: []int{1}, GiveUp: "limit"}, 0, 0xff},
		{"restart of no rank", wire.OpRestart, &restartReq{Mesh: "c.m1"}, 3, wire.DropIDs},
		{"restart of a rank twice", wire.OpRestart, &restartReq{Mesh: "c.m1", Ranks: []int{1, 1}}, 3, wire.DropIDs},
		{"restart of a negative rank", wire.OpRestart, &restartReq{Mesh: "c.m1", Ranks: []int{-1}}, 3, wire.DropIDs},
		{"restart of the system actor", wire.OpRestart, &restartReq{Mesh: sysMesh, Ranks: []int{0}}, 3, wire.DropIDs},
		{"stop of \"\"", wire.OpStop, &stopReq{}, 0, wire.DropIDs},
		{"stop of a number", wire.OpStop, map[string]any{"mesh": 5}, 0, wire.DropBody},
		{"gone", wire.OpGone, &wire.GoneNotice{Proc: "c-1"}, 0, 0xff},
		{"gone of \"\"", wire.OpGone, &wire.GoneNotice{}, 0, wire.DropIDs},
		{"gone, with when", wire.OpGone, &wire.GoneNotice{Proc: "c-1", Status: 1, At: 1_800_000_000_123_456_789}, 0, 0xff},
		{"gone before 1970", wire.OpGone, &wire.GoneNotice{Proc: "c-1", At: -1}, 0, wire.DropIDs},
		{"gone, with its error's time", wire.OpGone, &wire.GoneNotice{Proc: "c-1", Status: 1, At: 1_800_000_000_123_456_789, ErrAt: 1_800_000_000_100_000_000}, 0, 0xff},
		{"gone, its error's time but not its end's", wire.OpGone, &wire.GoneNotice{Proc: "c-1", Status: 1, ErrAt: 1_800_000_000_100_000_000}, 0, 0xff},
		{"gone, its error before 1970", wire.OpGone, &wire.GoneNotice{Proc: "c-1", At: 1_800_000_000_123_456_789, ErrAt: -1}, 0, wire.DropIDs},
		{"gone, its error after its end", wire.OpGone, &wire.GoneNotice{Proc: "c-1", At: 1_800_000_000_123_456_789, ErrAt: 1_800_000_000_123_456_790}, 0, wire.DropIDs},
		{"port gone", wire.OpPortGone, &wire.PortGone{ID: 4}, 0, 0xff},
		{"port 0 gone", wire.OpPortGone, &wire.PortGone{}, 0, wire.DropIDs},
		{"spawnprocs", wire.OpSpawnProcs, &wire.SpawnProcsReq{IDs: []string{"c-1"}, Ranks: []int{0}, Env: [][]string{nil}, Proc: "c", Port: 2}, 3, 0xff},
		{"spawnprocs of \"\"", wire.OpSpawnProcs, &wire.SpawnProcsReq{IDs: []string{""}, Ranks: []int{0}, Env: [][]string{nil}, Proc: "c", Port: 2}, 3, wire.DropIDs},
		{"spawnprocs of nothing", wire.OpSpawnProcs, &wire.SpawnProcsReq{Proc: "c", Port: 2}, 3, wire.DropIDs},
		{"spawnprocs with no ready port", wire.OpSpawnProcs, &wire.SpawnProcsReq{IDs: []string{"c-1"}, Ranks: []int{0}, Env: [][]string{nil}, Proc: "c"}, 3, wire.DropIDs},
		{"respawnproc", wire.OpRespawnProc, &wire.RespawnProcReq{Old: "c-1", New: "c-5", Proc: "c", Port: 2}, 3, 0xff},
		{"respawnproc without a reply port", wire.OpRespawnProc, &wire.RespawnProcReq{Old: "c-1", New: "c-5", Proc: "c", Port: 2}, 0, wire.DropIDs},
		{"respawnproc of \"\"", wire.OpRespawnProc, &wire.RespawnProcReq{New: "c-5", Proc: "c", Port: 2}, 3, wire.DropIDs},
		{"respawnproc as a wildcard", wire.OpRespawnProc, &wire.RespawnProcReq{Old: "c-1", New: ">", Proc: "c", Port: 2}, 3, wire.DropIDs},
		{"respawnproc with no ready port", wire.OpRespawnProc, &wire.RespawnProcReq{Old: "c-1", New: "c-5", Proc: "c"}, 3, wire.DropIDs},
		{"respawnproc with no ready proc", wire.OpRespawnProc, &wire.RespawnProcReq{Old: "c-1", New: "c-5", Port: 2}, 3, wire.DropIDs},
		{"respawnproc of a number", wire.OpRespawnProc, map[string]any{"old": 5}, 3, wire.DropBody},
		{"stopprocs", wire.OpStopProcs, &wire.StopProcsReq{IDs: []string{"c-1"}}, 3, 0xff},
		{"stopprocs of \"\"", wire.OpStopProcs, &wire.StopProcsReq{IDs: []string{""}}, 3, wire.DropIDs},
		{"synclogs without a reply port", wire.OpSyncLogs, &wire.StopProcsReq{IDs: []string{"c-1"}}, 0, wire.DropIDs},
		{"failure", wire.OpFailure, &MeshFailure{Mesh: "w", MeshID: "c.m2", ActorID: "w[0]", Proc: "c-1"}, 0, 0xff},
		{"failure of no mesh", wire.OpFailure, &MeshFailure{Mesh: "w", ActorID: "w[0]", Proc: "c-1"}, 0, wire.DropIDs},
		{"failure of no actor", wire.OpFailure, &MeshFailure{Mesh: "w", MeshID: "c.m2", Proc: "c-1"}, 0, wire.DropIDs},
		{"failure on no proc", wire.OpFailure, &MeshFailure{Mesh: "w", MeshID: "c.m2", ActorID: "w[0]"}, 0, wire.DropIDs},
		{"unknown op", "explode", nil, 0, wire.DropOp},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body, err := msgpack.Marshal(tt.body)
			if err != nil {
				t.Fatal(err)
			}
			f := &wire.Frame{Header: wire.Header{Kind: wire.KindControl, Method: tt.op, Port: tt.port, ReplyTo: "c", Rank: -1}, Payload: body}
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
