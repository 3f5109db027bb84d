package bus

import (
	"runtime"
	"testing"

	"github.com/nats-io/nats-server/v2/server"
)

// TestServerSizedToUse: a server allocates what it uses. NATS keeps a
// ring of its closed connections for the monitor (off here), 10,000 of
// them made when the server is made unless told otherwise, about 190 KB
// a server: a test process with a server a simulated host
// (actorrt/actortest) holds hundreds. Ours, made from serverOptions, is
// measured beside one made from the same options with NATS's default,
// in turns, so that what else the process allocates meanwhile falls on
// both.
func TestServerSizedToUse(t *testing.T) {
	ours, err := serverOptions(&ServerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	natsDefault := *ours
	natsDefault.MaxClosedClients = 0
	var oursBytes, defaultBytes uint64
	const rounds = 10
	for range rounds {
		oursBytes += made(t, ours)
		defaultBytes += made(t, &natsDefault)
	}
	oursKiB, defaultKiB := oursBytes/rounds>>10, defaultBytes/rounds>>10
	t.Logf("a server allocates %d KiB when made; %d KiB with NATS's default ring", oursKiB, defaultKiB)
	if oursKiB+50 > defaultKiB {
		t.Fatalf("a server allocates %d KiB when made, NATS's default %d KiB: want at least 50 KiB less", oursKiB, defaultKiB)
	}
}

// made is what making a NATS server with opts allocated.
func made(t *testing.T, opts *server.Options) uint64 {
	t.Helper()
	o := opts.Clone()
	before := allocated()
	if _, err := server.NewServer(o); err != nil {
		t.Fatal(err)
	}
	return allocated() - before
}

// allocated is the bytes allocated so far, freed or not.
func allocated() uint64 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.TotalAlloc
}
