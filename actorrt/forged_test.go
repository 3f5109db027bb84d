package actorrt_test

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/monarch-go/monarch/actorrt"
	"github.com/monarch-go/monarch/internal/reliable"
	"github.com/nats-io/nats.go"
)

// The delivery layer's own frames, forged by a peer holding the job's
// token: none of them may fail an actor, end a process or grow what a
// process keeps without bound.

var remoteDeliveryState = actorrt.Remote("test_delivery_state", func(ctx context.Context) ([2]uint64, error) {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return [2]uint64{uint64(actorrt.DeliverySenders()), ms.HeapInuse}, nil
})

func deliveryState(t *testing.T, ctx context.Context, procs *actorrt.ProcMesh) (senders int, heap uint64) {
	t.Helper()
	v, err := remoteDeliveryState.Call(procs).Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	s := v.Values()[0]
	return int(s[0]), s[1]
}

// TestForgedDeliveryFrames: a "no longer held" answer for numbers the
// receiver has (the answer a NAK retry that crossed an acknowledgement
// used to draw), a NAK from a proc that receives nothing of the sender, a
// tail marker whose sender id is 5,000 bytes, garbage acknowledgement and
// run bodies, and a broadcast whose argument does not decode: each is
// dropped or changes nothing; no actor fails, and calls go on both ways.
func TestForgedDeliveryFrames(t *testing.T) {
	ctx := testCtx(t)
	procs := spawnProcs(t, actorrt.Dims{{"gpus", 1}})
	echo := spawn[Echo](t, procs, "forged-echo")
	rec := spawn[Recorder](t, procs, "forged-rec")
	proc := actorrt.ProcIDs(procs)[0]
	_, peer := jobPeer(t)
	for i := 0; i < 20; i++ { // numbers for the answers to name
		if _, err := actorrt.Method((*Echo).Ping).CallOne(echo).Get(ctx); err != nil {
			t.Fatal(err)
		}
	}
	failuresBefore := failureCount()
	procBefore := remoteCounts(t, ctx, procs)
	clientBefore := actorrt.DropCounts()

	procInbox, clientInbox := actorrt.ProcSubject(proc), actorrt.ProcSubject(actorrt.ClientProc)
	send := func(subject string, h actorrt.TestHeader, body []byte) {
		t.Helper()
		if err := peer.Publish(subject, actorrt.EncodeFrame(h, body)); err != nil {
			t.Fatal(err)
		}
	}
	// "No longer held", for numbers each side has had for a while.
	send(procInbox, actorrt.TestHeader{Kind: actorrt.KindNak, Flags: actorrt.FlagMissing, Target: "proc." + proc,
		ReplyTo: actorrt.ClientProc, Rank: -1}, actorrt.SpanBody(1, 20))
	send(clientInbox, actorrt.TestHeader{Kind: actorrt.KindNak, Flags: actorrt.FlagMissing, Target: "proc." + actorrt.ClientProc,
		ReplyTo: proc, Rank: -1}, actorrt.SpanBody(1, 20))
	// A NAK from a proc that receives nothing of the client: no answer.
	send(clientInbox, actorrt.TestHeader{Kind: actorrt.KindNak, Target: "proc." + proc, ReplyTo: "stranger", Rank: -1}, actorrt.SpanBody(1, 20))
	// A tail marker whose sender id would make the NAK's subject longer
	// than NATS's control line.
	send(procInbox, actorrt.TestHeader{Kind: actorrt.KindTail, From: strings.Repeat("x", 5000), Seq: 9, Rank: -1}, nil)
	// Bodies that do not read.
	send(procInbox, actorrt.TestHeader{Kind: actorrt.KindAck, ReplyTo: actorrt.ClientProc, Rank: -1}, []byte{0xdd, 0xff, 0xff, 0xff, 0xff})
	send(procInbox, actorrt.TestHeader{Kind: actorrt.KindRun, From: actorrt.ClientProc, Seq: 1 << 40, Rank: -1}, []byte{9, 1})
	// A broadcast whose argument is not the int Note takes: nobody waits
	// for it, and it is dropped, not the actor's failure.
	send(actorrt.MeshSubjectOf(rec), actorrt.TestHeader{Kind: actorrt.KindActor, Target: meshID(t, rec), Method: "Note", Rank: -1},
		mp(t, []any{"not a number"}))
	peer.Flush()

	waitCounts(t, "proc "+proc, procBefore, map[string]uint64{"ids": 1, "body": 1, "frame": 1, "args": 1},
		func() map[string]uint64 { return remoteCounts(t, ctx, procs) })
	waitCounts(t, "client", clientBefore, map[string]uint64{}, actorrt.DropCounts)
	// Everything still works, and nothing failed.
	for i := 0; i < 20; i++ {
		if v, err := actorrt.Method1((*Echo).Say).CallOne(echo, "still here").Get(ctx); err != nil || v != "still here" {
			t.Fatalf("call after the forged frames: %q, %v", v, err)
		}
	}
	if err := actorrt.VoidMethod1((*Recorder).Note).Broadcast(rec, 7); err != nil {
		t.Fatal(err)
	}
	if seen, err := actorrt.Method((*Recorder).Seen).CallOne(rec).Get(ctx); err != nil || len(seen) != 1 || seen[0] != 7 {
		t.Fatalf("the recorder saw %v, %v; want [7]", seen, err)
	}
	if n := failureCount(); n != failuresBefore {
		t.Errorf("%d failures reached the fault hook", n-failuresBefore)
	}
}

// TestMadeUpSenders: 8,000 senders that do not exist, each with a frame
// that shows a gap (and so a NAK), keep a proc's state bounded: it tracks
// at most 1,024 senders never delivered from, its heap grows by a few MiB
// at most, it asks each of them a few times at most, and it keeps
// working.
func TestMadeUpSenders(t *testing.T) {
	ctx := testCtx(t)
	procs := spawnProcs(t, actorrt.Dims{{"gpus", 1}})
	echo := spawn[Echo](t, procs, "madeup-echo")
	proc := actorrt.ProcIDs(procs)[0]
	job, peer := jobPeer(t)
	var mu sync.Mutex
	naks := map[string]int{} // per made-up sender
	sub, err := peer.Subscribe("mon."+job+".proc.*", func(m *nats.Msg) {
		if strings.HasPrefix(m.Subject, "mon."+job+".proc.fake-") {
			mu.Lock()
			naks[m.Subject]++
			mu.Unlock()
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	_, heapBefore := deliveryState(t, ctx, procs)
	dropsBefore := remoteCounts(t, ctx, procs)
	const n = 8000
	payload := mp(t, []any{})
	start := time.Now()
	for i := range n {
		h := actorrt.TestHeader{Kind: actorrt.KindActor, Target: "sys", Method: "Run", Rank: -1, From: fmt.Sprintf("fake-%d", i), Seq: 5}
		if err := peer.Publish(actorrt.ProcSubject(proc), actorrt.EncodeFrame(h, payload)); err != nil {
			t.Fatal(err)
		}
	}
	peer.Flush()
	waitCounts(t, "proc "+proc, dropsBefore, map[string]uint64{"sender": n - 1024}, func() map[string]uint64 {
		c := remoteCounts(t, ctx, procs)
		return map[string]uint64{"sender": c["sender"]} // only the senders forgotten
	})
	senders, heapAfter := deliveryState(t, ctx, procs)
	if senders > 1024+2 { // the made-up ones, and the client's
		t.Errorf("the proc tracks %d senders after %d made-up ones", senders, n)
	}
	if grew := int64(heapAfter) - int64(heapBefore); grew > 16<<20 {
		t.Errorf("the proc's heap grew by %d MiB for %d made-up senders", grew>>20, n)
	}
	time.Sleep(2 * time.Second) // NAK retries at 250ms, 750ms, 1750ms, ...
	// Each made-up sender is asked once, and again at most as often as
	// the retries due while the test ran allow (a loaded machine is slow
	// and keeps them longer), and one more for a tick at the edge; those
	// forgotten for newer ones are asked no more.
	elapsed := time.Since(start)
	mu.Lock()
	most, asked, total := 0, len(naks), 0
	for _, c := range naks {
		most, total = max(most, c), total+c
	}
	mu.Unlock()
	if bound := 2 + retriesBy(elapsed); most > bound {
		t.Errorf("a made-up sender was asked %d times in %v; want at most %d", most, elapsed.Round(time.Millisecond), bound)
	}
	t.Logf("%d NAKs to %d made-up senders in %v", total, asked, elapsed.Round(time.Millisecond))
	for i := 0; i < 10; i++ {
		if _, err := actorrt.Method((*Echo).Ping).CallOne(echo).Get(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// retriesBy is how many times a receiver asks again for a gap within d
// of its first asking (reliable.Inbox.Tick: after NakRetry, then twice as
// long each time, up to 16 x NakRetry).
func retriesBy(d time.Duration) int {
	n := 0
	for at, i := time.Duration(0), 0; ; i++ {
		if at += reliable.NakRetry << min(i, 4); at > d {
			return n
		}
		n++
	}
}

func failureCount() int {
	failures.mu.Lock()
	defer failures.mu.Unlock()
	return len(failures.all)
}
