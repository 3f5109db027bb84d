package actorrt_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/monarch-go/monarch/actorrt"
	"github.com/monarch-go/monarch/ibverbs"
	"github.com/monarch-go/monarch/internal/testenv"
	"github.com/monarch-go/monarch/internal/wire"
	"github.com/nats-io/nats.go"
)

// Frames whose payload travels out of band, forged by a buggy peer
// holding the job's token in the name of a proc of the job: references
// to an owner that never answers, to buffers nobody serves, claiming a
// gigabyte, or naming another process's memory with a made-up key. None
// may stall a proc's other traffic past seconds, bloat it, or deliver
// bytes its sender had no key for; every actor answers afterwards.

// oobRef is a reference to a payload sent out of band, as the delivery
// layer encodes it (internal/delivery, oobRef).
type oobRef struct {
	ID     uint64         `msgpack:"id"`
	Size   int            `msgpack:"size"`
	Handle ibverbs.Handle `msgpack:"h"`
}

var remotePeakRSS = actorrt.Remote("test_peak_rss", func(ctx context.Context) (int64, error) {
	var ru syscall.Rusage
	err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return ru.Maxrss << 10, err
})

// forger sends numbered frames to a proc's inbox in the name of another
// proc of the job (from), numbered from 1 on: what that proc, had it a
// bug, would send.
type forger struct {
	t     *testing.T
	peer  *nats.Conn
	to    string // the victim's inbox subject
	from  string
	seq   uint64
	mesh  string // the Echo mesh the calls go to
	reply string // where answers go
}

// call forges a call to Echo's method with payload, out of band if ref
// is set; port 0 asks no answer.
func (f *forger) call(method string, port uint64, payload []byte, oob bool) {
	f.t.Helper()
	f.seq++
	h := actorrt.TestHeader{Kind: actorrt.KindActor, Target: f.mesh, Method: method, Port: port, ReplyTo: f.reply, Rank: -1, From: f.from, Seq: f.seq}
	if oob {
		h.Flags = wire.FlagOutOfBand
	}
	if err := f.peer.Publish(f.to, actorrt.EncodeFrame(h, payload)); err != nil {
		f.t.Fatal(err)
	}
}

// answer is what came back to a forged call's port.
type answer struct {
	failed  bool
	payload []byte
}

// answers collects the answers sent to proc id's inbox, by port.
type answers struct {
	mu   sync.Mutex
	port map[uint64]answer
}

func watch(t *testing.T, peer *nats.Conn, job, id string) *answers {
	t.Helper()
	a := &answers{port: map[uint64]answer{}}
	keep := func(f wire.Frame) {
		if f.Kind == wire.KindPort {
			a.port[f.Port] = answer{failed: f.Flags&wire.FlagError != 0, payload: bytes.Clone(f.Payload)}
		}
	}
	sub, err := peer.Subscribe("mon."+job+".proc."+id, func(m *nats.Msg) {
		f, err := wire.Parse(m.Data)
		if err != nil {
			return
		}
		a.mu.Lock()
		defer a.mu.Unlock()
		if f.Kind != wire.KindRun {
			keep(f)
			return
		}
		r := wire.ReadRun(f.Payload)
		for {
			mf, ok, err := r.Next()
			if !ok || err != nil {
				return
			}
			keep(mf)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sub.Unsubscribe() })
	return a
}

// wait waits (a minute at most) for the answers to ports and returns
// them.
func (a *answers) wait(t *testing.T, ports ...uint64) map[uint64]answer {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		a.mu.Lock()
		got := map[uint64]answer{}
		for _, p := range ports {
			if v, ok := a.port[p]; ok {
				got[p] = v
			}
		}
		a.mu.Unlock()
		if len(got) == len(ports) {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("after a minute, answers to %d of ports %v", len(got), ports)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (a *answers) count() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.port)
}

// everyActorAnswers calls each member of echo, and checks that no
// failure reached the fault hook since before.
func everyActorAnswers(t *testing.T, ctx context.Context, echo *actorrt.ActorMesh[Echo], before int) {
	t.Helper()
	v, err := actorrt.Method((*Echo).Ping).Call(echo).Get(ctx)
	if err != nil {
		t.Fatalf("a call to every actor afterwards: %v", err)
	}
	if n := len(v.Values()); n != echo.Extent().NumRanks() {
		t.Fatalf("%d actors answered, of %d", n, echo.Extent().NumRanks())
	}
	if n := failureCount(); n != before {
		t.Errorf("%d failures reached the fault hook", n-before)
	}
}

// TestForgedPayloadsStalled: four procs each send a proc a payload out
// of band whose owner accepts and never answers (as many as a proc reads
// at once), then a small call. The client's large call to that proc is
// read and answered at once, before any of the stalled payloads fails
// (which takes the tcp backend's progress bound, 10 s); each stalled
// payload then fails to whoever waits for it, naming the owner, and the
// small call after it is answered. Every actor answers afterwards.
func TestForgedPayloadsStalled(t *testing.T) {
	ctx := testCtx(t)
	procs := spawnProcs(t, actorrt.Dims{{"gpus", 5}})
	echo := spawn[Echo](t, procs, "oob-stalled")
	ids := actorrt.ProcIDs(procs)
	victim, liars := ids[0], ids[1:]
	job, peer := jobPeer(t)
	got := watch(t, peer, job, "watcher")
	failuresBefore := failureCount()
	stalled := testenv.StalledServer(t)
	for i, id := range liars {
		f := &forger{t: t, peer: peer, to: actorrt.ProcSubject(clientCtx, victim), from: id, mesh: meshID(t, echo), reply: "watcher"}
		ref := oobRef{ID: 1, Size: 1 << 20, Handle: ibverbs.Handle{Size: 1 << 20, Key: uint64(i + 1), FD: -1, Addr: stalled}}
		f.call("Bytes", uint64(1+i), mp(t, ref), true)
		f.call("Ping", uint64(101+i), mp(t, []any{}), false)
	}
	peer.Flush()

	data := bytes.Repeat([]byte{7}, 1<<20)
	back, err := actorrt.Method1((*Echo).Bytes).CallOne(echo.At("gpus", 0), data).Get(ctx)
	if err != nil || !bytes.Equal(back, data) {
		t.Fatalf("the client's large call beside the stalled payloads: %d bytes back, %v", len(back), err)
	}
	if n := got.count(); n != 0 {
		t.Errorf("%d answers to the stalled payloads' senders came before the client's large call was answered: it waited behind them", n)
	}
	all := got.wait(t, 1, 2, 3, 4, 101, 102, 103, 104)
	for port, a := range all {
		switch {
		case port < 100 && (!a.failed || !bytes.Contains(a.payload, []byte(stalled))):
			t.Errorf("the stalled payload of port %d: failed %v, %q; want an error naming %s", port, a.failed, a.payload, stalled)
		case port > 100 && a.failed:
			t.Errorf("the call after a stalled payload (port %d) failed: %q", port, a.payload)
		}
	}
	everyActorAnswers(t, ctx, echo, failuresBefore)
}

// TestForgedPayloadsLie: a proc sends another payloads out of band that
// name what its owner does not serve: the client's buffer on the host
// with a made-up key (its pid, fd, size and inode, what anyone on the
// host sees), through shm and tcp; four references claiming a gigabyte
// each; 20,000 references to an owner that is not there. Each fails to
// whoever waits, and none delivers the buffer's bytes; the receiver's
// peak resident size does not grow by the gigabytes claimed, its heap
// keeps nothing of the 20,000 (less than 2 MiB more: a binding kept per
// handle tried took 4.4), and every actor answers afterwards.
func TestForgedPayloadsLie(t *testing.T) {
	ctx := testCtx(t)
	procs := spawnProcs(t, actorrt.Dims{{"gpus", 2}})
	echo := spawn[Echo](t, procs, "oob-lies")
	ids := actorrt.ProcIDs(procs)
	victim := ids[0]
	job, peer := jobPeer(t)
	got := watch(t, peer, job, "watcher")
	failuresBefore := failureCount()
	secret, err := ibverbs.NewBuffer(1 << 20)
	if err != nil {
		t.Fatal(err)
	}
	defer secret.Close()
	// The buffer holds a call's arguments: read, they would be Digest's.
	secretBytes := bytes.Repeat([]byte("secret"), 1<<16)
	args := mp(t, []any{secretBytes})
	copy(secret.Bytes(), args)
	secretSum := sha256.Sum256(secretBytes)

	f := &forger{t: t, peer: peer, to: actorrt.ProcSubject(clientCtx, victim), from: ids[1], mesh: meshID(t, echo), reply: "watcher"}
	viaShm, viaTCP := secret.Handle(), secret.Handle()
	viaShm.Key ^= 0x5a5a
	viaTCP.Key ^= 0x5a5a
	viaTCP.Boot = "" // not this host's: through the owner's tcp server
	f.call("Digest", 1, mp(t, oobRef{ID: 1, Size: len(args), Handle: viaShm}), true)
	f.call("Digest", 2, mp(t, oobRef{ID: 1, Size: len(args), Handle: viaTCP}), true)

	peakBefore := peakRSS(t, ctx, procs)
	for i := range 4 {
		claim := viaTCP
		claim.Size, claim.Key = 1<<30, uint64(i+1)
		f.call("Digest", uint64(3+i), mp(t, oobRef{ID: 1, Size: 1 << 30, Handle: claim}), true)
	}
	for port, a := range got.wait(t, 1, 2, 3, 4, 5, 6) {
		if !a.failed || bytes.Contains(a.payload, secretSum[:]) || !bytes.Contains(a.payload, []byte("delivery: read the payload")) {
			t.Errorf("a reference with a made-up key (port %d): failed %v, %q; want the payload's read to fail, not the buffer's bytes to reach the actor", port, a.failed, a.payload)
		}
	}
	if grew := peakRSS(t, ctx, procs) - peakBefore; grew > 256<<20 {
		t.Errorf("4 references claiming 1 GiB each: the receiver's peak resident size grew by %d MiB", grew>>20)
	}

	_, heapBefore := deliveryState(t, ctx, procs)
	dropsBefore := remoteCounts(t, ctx, procs)
	const n = 20000
	for i := range n {
		h := ibverbs.Handle{Size: 1 << 20, Key: uint64(i), FD: -1, Addr: "127.0.0.1:1"}
		f.call("Digest", 0, mp(t, oobRef{ID: 1, Size: 1 << 20, Handle: h}), true)
	}
	peer.Flush()
	waitCounts(t, "proc "+victim, dropsBefore, map[string]uint64{"payload": n}, func() map[string]uint64 {
		c := remoteCounts(t, ctx, procs)
		return map[string]uint64{"payload": c["payload"]}
	})
	_, heapAfter := deliveryState(t, ctx, procs)
	t.Logf("the receiver's heap: %d KiB before the %d references, %d KiB after", heapBefore>>10, n, heapAfter>>10)
	if int64(heapAfter)-int64(heapBefore) > 2<<20 {
		t.Errorf("%d references that failed left %d MiB of the receiver's heap", n, (int64(heapAfter)-int64(heapBefore))>>20)
	}
	everyActorAnswers(t, ctx, echo, failuresBefore)
}

// peakRSS is the peak resident size of procs' first proc.
func peakRSS(t *testing.T, ctx context.Context, procs *actorrt.ProcMesh) int64 {
	t.Helper()
	v, err := remotePeakRSS.Call(procs).Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return v.Values()[0]
}
