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
	"github.com/monarch-go/monarch/internal/delivery"
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
	return [2]uint64{uint64(actorrt.DeliverySenders(ctx)), ms.HeapInuse}, nil
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
	j := newForgedJob(t, "forged", 1)
	ctx, echo, proc := j.ctx, j.echo, j.proc
	rec := spawn[Recorder](t, j.procs, "forged-rec")
	for i := 0; i < 20; i++ { // numbers for the answers to name
		if _, err := actorrt.Method((*Echo).Ping).CallOne(echo).Get(ctx); err != nil {
			t.Fatal(err)
		}
	}
	j.before(t)
	procInbox, clientInbox := actorrt.ProcSubject(clientCtx, proc), actorrt.ProcSubject(clientCtx, actorrt.ClientProc)
	send := func(subject string, h actorrt.TestHeader, body []byte) {
		t.Helper()
		if err := j.peer.Publish(subject, actorrt.EncodeFrame(h, body)); err != nil {
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
	j.wait(t, map[string]uint64{"ids": 1, "body": 1, "frame": 1, "args": 1}, map[string]uint64{})
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
	if n := failureCount(); n != j.failures {
		t.Errorf("%d failures reached the fault hook", n-j.failures)
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
		if err := peer.Publish(actorrt.ProcSubject(clientCtx, proc), actorrt.EncodeFrame(h, payload)); err != nil {
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

// Frames from a buggy or stale peer holding the job's token, against the
// sequencing layer (issue 36): none may make a process declare messages
// lost, wait for what no member sent, or fill its sender table. Each test
// passes only if every actor answers afterwards and the fault hook saw
// nothing.

// emptyRun is a numbered frame that holds no message: a skipped number,
// delivered (and so confirming its sender) when it is next.
func emptyRun(from string, seq uint64) actorrt.TestHeader {
	return actorrt.TestHeader{Kind: actorrt.KindRun, From: from, Seq: seq, Rank: -1}
}

// forgedJob is what a test of forged frames works on: procs with an
// Echo each, a peer holding the job's token, and what the first proc's
// and the client's drop counters and the fault hook said before.
type forgedJob struct {
	ctx                    context.Context
	procs                  *actorrt.ProcMesh
	echo                   *actorrt.ActorMesh[Echo]
	proc                   string // the first proc
	job                    string
	peer                   *nats.Conn
	failures               int
	procDrops, clientDrops map[string]uint64
}

func newForgedJob(t *testing.T, name string, gpus int) *forgedJob {
	t.Helper()
	j := &forgedJob{ctx: testCtx(t), procs: spawnProcs(t, actorrt.Dims{{"gpus", gpus}})}
	j.echo = spawn[Echo](t, j.procs, name+"-echo")
	j.proc = actorrt.ProcIDs(j.procs)[0]
	j.job, j.peer = jobPeer(t)
	stillAnswers(t, j.ctx, j.echo, failureCount()) // numbers both ways
	j.before(t)
	return j
}

// before reads the counters and the fault hook's failures.
func (j *forgedJob) before(t *testing.T) {
	t.Helper()
	j.failures = failureCount()
	j.procDrops = j.drops(t)
	j.clientDrops = actorrt.DropCounts(clientCtx)
}

// drops reads the first proc's drop counters.
func (j *forgedJob) drops(t *testing.T) map[string]uint64 {
	t.Helper()
	return remoteCounts(t, j.ctx, j.procs.At("gpus", 0))
}

// send publishes a frame to proc to's inbox.
func (j *forgedJob) send(t *testing.T, to string, h actorrt.TestHeader, body []byte) {
	t.Helper()
	if err := j.peer.Publish(actorrt.ProcSubject(clientCtx, to), actorrt.EncodeFrame(h, body)); err != nil {
		t.Fatal(err)
	}
}

// wait waits for the first proc's and the client's drop counters to move
// by want, exactly.
func (j *forgedJob) wait(t *testing.T, procWant, clientWant map[string]uint64) {
	t.Helper()
	j.peer.Flush()
	waitCounts(t, "proc "+j.proc, j.procDrops, procWant, func() map[string]uint64 { return j.drops(t) })
	waitCounts(t, "client", j.clientDrops, clientWant, clientDrops)
}

// stillAnswers checks that every actor answers calls, both ways, and that
// no failure reached the fault hook since before.
func stillAnswers(t *testing.T, ctx context.Context, echo *actorrt.ActorMesh[Echo], failuresBefore int) {
	t.Helper()
	for i := 0; i < 10; i++ {
		if v, err := actorrt.Method1((*Echo).Say).Call(echo, "still here").Get(ctx); err != nil {
			t.Fatalf("call after the forged frames: %v", err)
		} else {
			for _, s := range v.Values() {
				if s != "still here" {
					t.Fatalf("call after the forged frames: %q", s)
				}
			}
		}
	}
	if n := failureCount(); n != failuresBefore {
		t.Errorf("%d failures reached the fault hook", n-failuresBefore)
	}
}

// TestStrangerSaysMissing: three frames from a sender that is no member
// of the job (an empty run numbered 1, another numbered 3, then "no
// longer held" for 2), under an id no proc is given and under one a proc
// could have (c-99991, which the client, asked, does not vouch for), to a
// proc and to the client. Nothing is lost: the answers are dropped and
// counted, and the sender is found a stranger.
func TestStrangerSaysMissing(t *testing.T) {
	j := newForgedJob(t, "stranger", 2)
	for _, to := range []string{j.proc, actorrt.ClientProc} {
		for _, from := range []string{"stranger", "c-99991"} {
			j.send(t, to, emptyRun(from, 1), nil)
			j.send(t, to, emptyRun(from, 3), nil)
			// After the NAK for 2 went out: an answer before it would be
			// dropped as unasked whatever the sender.
			j.peer.Flush()
			time.Sleep(50 * time.Millisecond)
			j.send(t, to, actorrt.TestHeader{Kind: actorrt.KindNak, Flags: actorrt.FlagMissing, Target: "proc." + to, ReplyTo: from, Rank: -1},
				actorrt.SpanBody(2, 2))
		}
	}
	j.wait(t, map[string]uint64{"sender": 2}, map[string]uint64{"sender": 2})
	stillAnswers(t, j.ctx, j.echo, j.failures)
}

// TestFarNumbers: four frames in the client's name numbered 2^40 on, and
// a tail marker at 2^63, to a proc; the same in the proc's name to the
// client. Each is refused at once (dropped and counted), not held as a
// gap that is given up on, as lost, when no answer comes.
func TestFarNumbers(t *testing.T) {
	j := newForgedJob(t, "far", 1)
	payload := mp(t, []any{})
	for _, pair := range [][2]string{{actorrt.ClientProc, j.proc}, {j.proc, actorrt.ClientProc}} {
		from, to := pair[0], pair[1]
		for i := range uint64(4) {
			j.send(t, to, actorrt.TestHeader{Kind: actorrt.KindActor, Target: "sys", Method: "Run", Rank: -1, From: from, Seq: 1<<40 + i}, payload)
		}
		j.send(t, to, actorrt.TestHeader{Kind: actorrt.KindTail, From: from, Seq: 1 << 63, Rank: -1}, nil)
	}
	j.wait(t, map[string]uint64{"sender": 5}, map[string]uint64{"sender": 5})
	stillAnswers(t, j.ctx, j.echo, j.failures)
}

// TestForgedGapGivenUp: a frame in the client's name numbered a million
// on (within what a sender may be ahead) to a proc: the gap it opens gets
// no answer from the real client, and at the give-up it is dropped and
// counted, not declared lost. Calls go on meanwhile and after. (The same
// in a proc's name to the client stays open while the proc's heartbeats
// to its agent fill it from below: progress, which starts the give-up's
// count again; it fails nothing either.)
func TestForgedGapGivenUp(t *testing.T) {
	j := newForgedJob(t, "gap", 1)
	j.send(t, j.proc, emptyRun(actorrt.ClientProc, 1<<20), nil)
	j.peer.Flush()
	stillAnswers(t, j.ctx, j.echo, j.failures) // while the gap is open
	// The give-up comes twice the senders' history (24s here) after the
	// gap opened or its sender last made progress on it: wait for it
	// quietly (a call's frame delivered would start the count again),
	// then for the count, bounded.
	time.Sleep(2*delivery.MinRetain + 2*time.Second)
	deadline := time.Now().Add(30 * time.Second)
	for {
		n := j.drops(t)["sender"] - j.procDrops["sender"]
		if n >= 1 {
			if n != 1 {
				t.Errorf("the give-up dropped %d times; want 1", n)
			}
			break
		}
		if f := failureCount(); f != j.failures || time.Now().After(deadline) {
			t.Fatalf("no give-up seen, %d failures", f-j.failures)
		}
		time.Sleep(500 * time.Millisecond)
	}
	stillAnswers(t, j.ctx, j.echo, j.failures)
}

// TestDeliveredMadeUpSenders: 70,000 made-up senders, each delivered
// from (an empty run numbered 1), to the client: its sender table keeps
// at most the bound on strangers of them, and a new proc starts and
// answers after them.
func TestDeliveredMadeUpSenders(t *testing.T) {
	j := newForgedJob(t, "flood", 1)
	const n, batch, strangers = 70000, 5000, 1024
	for sent := 0; sent < n; {
		for range batch {
			j.send(t, actorrt.ClientProc, emptyRun(fmt.Sprintf("fake-%d", sent), 1), nil)
			sent++
		}
		j.peer.Flush()
		// Within the bus's bound on what waits for the client: each new
		// one past the bound forgets another (strangers of other tests
		// too).
		deadline := time.Now().Add(20 * time.Second)
		for actorrt.DropCounts(clientCtx)["sender"]-j.clientDrops["sender"] < uint64(max(0, sent-strangers)) {
			if time.Now().After(deadline) {
				t.Fatalf("after %d made-up senders, the client forgot %d", sent, actorrt.DropCounts(clientCtx)["sender"]-j.clientDrops["sender"])
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	if s := actorrt.DeliverySenders(clientCtx); s > strangers+16 {
		t.Errorf("the client tracks %d senders after %d made-up ones", s, n)
	}
	fresh := spawnProcs(t, actorrt.Dims{{"gpus", 1}})
	stillAnswers(t, j.ctx, spawn[Echo](t, fresh, "flood-fresh-echo"), j.failures)
	stillAnswers(t, j.ctx, j.echo, j.failures)
}

var remoteStanding = actorrt.Remote1("test_sender_standing", func(ctx context.Context, id string) (string, error) {
	return actorrt.SenderStanding(ctx, id), nil
})

// TestVouchedSender: a proc that calls another proc's actor, which never
// heard of it (it holds no mesh of the caller's), is vouched for by the
// one that started it (the client) once its first call is delivered:
// then its word counts.
func TestVouchedSender(t *testing.T) {
	ctx := testCtx(t)
	callee := spawnProcs(t, actorrt.Dims{{"gpus", 1}})
	caller := spawnProcs(t, actorrt.Dims{{"gpus", 1}})
	crashers := spawn[Crasher](t, callee, "vouch-target")
	holder := spawn[RefHolder](t, caller, "vouch-holder")
	callerID := actorrt.ProcIDs(caller)[0]
	standing := func() string {
		v, err := remoteStanding.Call(callee, callerID).Get(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return v.Values()[0]
	}
	if s := standing(); s != "unknown" {
		t.Fatalf("the callee takes the caller %s for %s before it called; want unknown", callerID, s)
	}
	if err := actorrt.VoidMethod1((*RefHolder).Hold).Broadcast(holder, crashers); err != nil {
		t.Fatal(err)
	}
	if _, err := actorrt.Method((*RefHolder).CallHeld).CallOne(holder).Get(ctx); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for s := standing(); s != "member"; s = standing() {
		if time.Now().After(deadline) {
			t.Fatalf("the callee takes the caller %s for %s after its call; want member", callerID, s)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
