package bus

import (
	"runtime"
	"testing"
)

// TestServerSizedToUse: a server allocates what it uses. NATS keeps a
// ring of its closed connections for the monitor (off here), 10,000 of
// them made at start unless told otherwise, 190 KB a server: a test
// process with a server a simulated host (actorrt/actortest) holds
// hundreds.
func TestServerSizedToUse(t *testing.T) {
	const servers = 10
	before := allocated()
	for range servers {
		s, err := StartServer(ServerOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.Shutdown)
	}
	per := (allocated() - before) / servers
	t.Logf("a server allocates %d KiB to start", per>>10)
	if per > 200<<10 { // 240 KiB with the ring of 10,000
		t.Fatalf("a server allocates %d KiB to start", per>>10)
	}
}

// allocated is the bytes allocated so far, freed or not.
func allocated() uint64 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.TotalAlloc
}
