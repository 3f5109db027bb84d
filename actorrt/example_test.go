package actorrt_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/monarch-go/monarch/actorrt"
)

// The examples below follow the getting-started guide, one section each,
// and run as part of this package's tests: the test binary is the program.
// Its TestMain calls actorrt.Run, so each example runs in the client, and
// SpawnProcs starts the test binary again as the procs. Actor types are
// registered in every process, procs included, by the init functions here
// (and registerTestActors, for Counter).
//
// Counter is the guide's first actor (testactors_basic_test.go):
//
//	type Counter struct{ value int }
//
//	func (c *Counter) Init(ctx *actorrt.Context, initial int) error { c.value = initial; return nil }
//	func (c *Counter) Increment(ctx *actorrt.Context) error         { c.value++; return nil }
//	func (c *Counter) Add(ctx *actorrt.Context, n int) (int, error) { c.value += n; return c.value, nil }
//	func (c *Counter) GetValue(ctx *actorrt.Context) (int, error)   { return c.value, nil }
//
// Mesh names are per proc, and the examples share this process with the
// package's tests: theirs start with "example-", and each example stops
// what it spawned.

// Counter's endpoints, bound once: their methods are the adverbs.
var (
	incrementEp = actorrt.VoidMethod((*Counter).Increment)
	getValueEp  = actorrt.Method((*Counter).GetValue)
	addEp       = actorrt.Method1((*Counter).Add)
)

// exampleCtx bounds an example: a call that cannot be answered fails
// instead of hanging the test run.
func exampleCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(clientCtx, 30*time.Second)
}

// Spawn an actor in this process (ThisProc) and call it. CallOne sends to
// the single member of the mesh and returns a Future: the message travels
// while the caller goes on, and Get waits for the answer.
func ExampleSpawn() {
	ctx, cancel := exampleCtx()
	defer cancel()

	// The arguments after the name go to Counter's Init.
	counter, err := actorrt.Spawn[Counter](ctx, actorrt.ThisProc(ctx), "example-counter", 0)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer counter.Stop(ctx)

	value, err := getValueEp.CallOne(counter).Get(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("Counter value:", value)

	// An endpoint with an argument is bound by the numbered form (Method1)
	// and the compiler checks the argument's type.
	value, err = addEp.CallOne(counter, 5).Get(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("after Add(5):", value)
	// Output:
	// Counter value: 0
	// after Add(5): 5
}

// Broadcast to a mesh of actors on procs of their own, to a slice of it,
// then Call every member and gather the answers.
func ExampleEndpoint_Broadcast() {
	ctx, cancel := exampleCtx()
	defer cancel()

	// Four procs on this host, one dimension named gpus; each proc is this
	// program started again.
	procs, err := actorrt.ThisHost(ctx).SpawnProcs(ctx, actorrt.Dims{{"gpus", 4}})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer procs.Stop(ctx)
	counters, err := actorrt.Spawn[Counter](ctx, procs, "example-counters", 0)
	if err != nil {
		fmt.Println(err)
		return
	}

	// Broadcast expects no answer. Messages from one sender reach each actor
	// in the order sent, so the Call below sees both increments.
	if err := incrementEp.Broadcast(counters); err != nil {
		fmt.Println(err)
		return
	}
	// Slice keeps gpus 0 and 1 only.
	if err := incrementEp.Broadcast(counters.Slice("gpus", 0, 2)); err != nil {
		fmt.Println(err)
		return
	}

	// Call answers with a ValueMesh: one value per member, in rank order.
	values, err := getValueEp.Call(counters).Get(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(values)
	for point, v := range values.Items() {
		fmt.Println(point, v)
	}
	// Output:
	// ValueMesh{gpus: 4} [2 2 1 1]
	// {gpus: 0} 2
	// {gpus: 1} 2
	// {gpus: 2} 1
	// {gpus: 3} 1
}

// Position tells where its actor is: its rank in the whole mesh, and its
// place in the slice a message went to (the guide's "Actor Context").
type Position struct{}

func (p *Position) Where(ctx *actorrt.Context) (string, error) {
	return fmt.Sprintf("rank %v, message rank %v", ctx.ActorInstance().Rank(), ctx.MessageRank()), nil
}

var whereEp = actorrt.Method((*Position).Where)

func init() { mustRegister(actorrt.Register[Position]()) }

// A slice is a view: its members keep their rank in the mesh, and each
// message tells a member its place in the slice it was sent to.
func ExampleContext_MessageRank() {
	ctx, cancel := exampleCtx()
	defer cancel()

	// Four members on this proc, along gpus.
	positions, err := actorrt.SpawnPerProc[Position](ctx, actorrt.ThisProc(ctx), "example-positions", actorrt.Dims{{"gpus", 4}})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer positions.Stop(ctx)

	// gpus 2 and 3 only.
	answers, err := whereEp.Call(positions.Slice("gpus", 2, 4)).Get(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, a := range answers.Values() {
		fmt.Println(a)
	}
	// Output:
	// rank {gpus: 2}, message rank {gpus: 0}
	// rank {gpus: 3}, message rank {gpus: 1}
}

// Shard stands for a member holding a part of a data set.
type Shard struct{ rows int }

// Init gives each member a different size, from its rank in the mesh.
func (s *Shard) Init(ctx *actorrt.Context) error {
	s.rows = 10 * (ctx.ActorInstance().Rank().Rank() + 1)
	return nil
}

func (s *Shard) Rows(ctx *actorrt.Context) (int, error) { return s.rows, nil }

var rowsEp = actorrt.Method((*Shard).Rows)

func init() { mustRegister(actorrt.Register[Shard]()) }

// Stream the answers of every member as they arrive, or fold them with
// Accumulate, without waiting for the slowest member first.
func ExampleAccumulate() {
	ctx, cancel := exampleCtx()
	defer cancel()

	// SpawnPerProc puts several members on each proc: here 4 on this one.
	shards, err := actorrt.SpawnPerProc[Shard](ctx, actorrt.ThisProc(ctx), "example-shards", actorrt.Dims{{"shards", 4}})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer shards.Stop(ctx)

	// The replies come in arrival order, which varies from run to run:
	// sorted here to print them.
	var sizes []int
	for rows, err := range rowsEp.Stream(shards).All(ctx) {
		if err != nil {
			fmt.Println(err)
			return
		}
		sizes = append(sizes, rows)
	}
	slices.Sort(sizes)
	fmt.Println("shard sizes:", sizes)

	// Accumulate folds a stream from an identity (0) with combine, one
	// reply at a time, in this goroutine.
	total, err := actorrt.Accumulate(ctx, rowsEp.Stream(shards), 0,
		func(sum, rows int) int { return sum + rows })
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("total rows:", total)
	// Output:
	// shard sizes: [10 20 30 40]
	// total rows: 100
}

// A channel is a Port, which can be sent anywhere, and a PortReceiver,
// which stays here. The Send adverb asks every member of a mesh to answer
// on a port; the other adverbs are built the same way.
func ExampleOpenChannel() {
	ctx, cancel := exampleCtx()
	defer cancel()

	port, recv := actorrt.OpenChannel[int](ctx)
	defer recv.Close()
	if err := port.Send(3); err != nil {
		fmt.Println(err)
		return
	}
	v, err := recv.Recv().Get(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("received", v)

	counters, err := actorrt.SpawnPerProc[Counter](ctx, actorrt.ThisProc(ctx), "example-channel", actorrt.Dims{{"gpus", 3}}, 10)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer counters.Stop(ctx)
	if err := getValueEp.Send(counters, port); err != nil {
		fmt.Println(err)
		return
	}
	// One answer per member arrives on the channel.
	sum := 0
	for range counters.Extent().NumRanks() {
		v, err := recv.Recv().Get(ctx)
		if err != nil {
			fmt.Println(err)
			return
		}
		sum += v
	}
	fmt.Println("sum of the answers:", sum)
	// Output:
	// received 3
	// sum of the answers: 30
}

// Meeting answers its callers out of order: Join takes the caller's reply
// port (a PortMethod), keeps it and returns at once, so the actor takes
// the next message; it answers everyone when the last one has joined. An
// ordinary endpoint must answer before its actor takes the next message.
type Meeting struct {
	size    int
	waiting []actorrt.Port[string]
	names   []string
}

func (m *Meeting) Init(ctx *actorrt.Context, size int) error { m.size = size; return nil }

func (m *Meeting) Join(ctx *actorrt.Context, reply actorrt.Port[string], name string) error {
	m.waiting = append(m.waiting, reply)
	m.names = append(m.names, name)
	if len(m.waiting) < m.size {
		return nil // no answer yet: the port is kept
	}
	all := strings.Join(m.names, ", ")
	for _, p := range m.waiting {
		if err := p.Send(all); err != nil {
			return err
		}
	}
	m.waiting, m.names = nil, nil
	return nil
}

var joinEp = actorrt.PortMethod1((*Meeting).Join)

func init() { mustRegister(actorrt.Register[Meeting]()) }

// An endpoint that answers on a port: the caller sees an ordinary call
// (CallOne, a Future), the actor answers when it chooses.
func ExamplePortMethod1() {
	ctx, cancel := exampleCtx()
	defer cancel()

	meeting, err := actorrt.Spawn[Meeting](ctx, actorrt.ThisProc(ctx), "example-meeting", 3)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer meeting.Stop(ctx)

	ann := joinEp.CallOne(meeting, "ann")
	bob := joinEp.CallOne(meeting, "bob")
	select {
	case <-ann.Done():
		fmt.Println("ann was answered too early")
	case <-time.After(50 * time.Millisecond):
		fmt.Println("ann waits for the others")
	}
	cid := joinEp.CallOne(meeting, "cid")
	for _, f := range []*actorrt.Future[string]{ann, bob, cid} {
		who, err := f.Get(ctx)
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println("met", who)
	}
	// Output:
	// ann waits for the others
	// met ann, bob, cid
	// met ann, bob, cid
	// met ann, bob, cid
}

// Parser parses lines and keeps them in memory; an empty line is an error.
// It prints what it does: it runs in this process, so its output is the
// example's.
type Parser struct{ parsed []string }

func (p *Parser) Init(ctx *actorrt.Context) error {
	fmt.Println("parser starts")
	return nil
}

func (p *Parser) Parse(ctx *actorrt.Context, line string) error {
	if line == "" {
		return errors.New("empty line")
	}
	p.parsed = append(p.parsed, line)
	fmt.Println("parsed", line)
	return nil
}

func (p *Parser) Parsed(ctx *actorrt.Context) ([]string, error) { return p.parsed, nil }

var (
	parseEp  = actorrt.VoidMethod1((*Parser).Parse)
	parsedEp = actorrt.Method((*Parser).Parsed)
)

func init() { mustRegister(actorrt.Register[Parser]()) }

// Supervision with a restart: an error nobody receives (the endpoint's
// error after a Broadcast) fails the actor. Without a policy the failure
// goes to the mesh's owner (its Supervise method, or the client's fault
// hook); with a RestartPolicy the member is replaced in place: same mesh
// and rank, a new instance whose Init runs again. Its state is lost, but
// the messages queued behind the failure reach the new instance, in order.
func ExampleRestartPolicy() {
	ctx, cancel := exampleCtx()
	defer cancel()

	// Up to 3 restarts a minute; no Backoff, so the restart is at once.
	policy := actorrt.RestartPolicy{MaxRestarts: 3, Window: time.Minute}
	parser, err := actorrt.SpawnWith[Parser](ctx, actorrt.ThisProc(ctx), "example-parser",
		actorrt.SpawnOptions{Restart: &policy})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer parser.Stop(ctx)

	for _, line := range []string{"a", "", "b"} {
		if err := parseEp.Broadcast(parser, line); err != nil {
			fmt.Println(err)
			return
		}
	}
	// A call that was waiting in the failed instance's mailbox ends with
	// ErrActorFailed: ask again, and the new instance answers.
	parsed, err := parsedEp.CallOne(parser).Get(ctx)
	for errors.Is(err, actorrt.ErrActorFailed) {
		parsed, err = parsedEp.CallOne(parser).Get(ctx)
	}
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("the new instance has", parsed)
	// Output:
	// parser starts
	// parsed a
	// parser starts
	// parsed b
	// the new instance has [b]
}

// procRank is a free remote function: no actor, it runs in the proc it is
// called on (here it reads the rank variables every proc gets). The
// package-level var registers it in every process under its name, which
// must be unique in the program.
var procRank = actorrt.Remote1("example_proc_rank", func(ctx context.Context, dim string) (string, error) {
	dim = strings.ToUpper(dim)
	return os.Getenv("MONARCH_RANK_"+dim) + " of " + os.Getenv("MONARCH_SIZE_"+dim), nil
})

// Call a free function on every proc of a mesh (Monarch's @remote).
func ExampleRemote1() {
	ctx, cancel := exampleCtx()
	defer cancel()

	procs, err := actorrt.ThisHost(ctx).SpawnProcs(ctx, actorrt.Dims{{"gpus", 2}})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer procs.Stop(ctx)

	ranks, err := procRank.Call(procs, "gpus").Get(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	for point, r := range ranks.Items() {
		fmt.Printf("proc %v: rank %s\n", point, r)
	}
	// Output:
	// proc {gpus: 0}: rank 0 of 2
	// proc {gpus: 1}: rank 1 of 2
}
