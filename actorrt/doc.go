// Package actorrt is the monarch SDK: actors with typed endpoints, meshes
// of actors over processes and hosts, and the adverbs that message them.
//
// # Usage
//
// An actor is an ordinary Go type. Its endpoints are the exported methods
// of its pointer type that take *Context first and return (R, error) or
// just error; an optional Init receives the arguments of the spawn:
//
//	type Counter struct{ value int }
//
//	func (c *Counter) Init(ctx *actorrt.Context, initial int) error { c.value = initial; return nil }
//	func (c *Counter) Increment(ctx *actorrt.Context) error         { c.value++; return nil }
//	func (c *Counter) GetValue(ctx *actorrt.Context) (int, error)   { return c.value, nil }
//
//	var (
//		increment = actorrt.VoidMethod((*Counter).Increment)
//		getValue  = actorrt.Method((*Counter).GetValue)
//	)
//
//	func main() {
//		actorrt.Register[Counter]()
//		actorrt.Main(func(ctx context.Context) error {
//			procs, err := actorrt.ThisHost(ctx).SpawnProcs(ctx, actorrt.Dims{{"gpus", 8}})
//			...
//			counters, err := actorrt.Init1((*Counter).Init).Spawn(ctx, procs, "counters", 0)
//			increment.Broadcast(counters)
//			increment.Broadcast(counters.Slice("gpus", 0, 4))
//			values, err := getValue.Call(counters).Get(ctx) // [2 2 2 2 1 1 1 1]
//			...
//		})
//	}
//
// The program is its own worker: SpawnProcs starts the same binary again,
// with the same arguments, and Main in that process serves actors instead
// of running the function. Register every actor type before Main, in
// every run. Everything else before Main runs once per proc too: put work
// with side effects (flags that start something, files, banners) inside
// Main's function, or after an IsProc check.
//
// Main exits the process with the job's status once it is done. Run is
// the same entry point without the exit: it returns the status, for a
// TestMain (os.Exit(actorrt.Run(fn)), fn running the tests) or a main
// with work left after the job. A program calls one of them.
//
// # Endpoints and adverbs
//
// An endpoint is bound once from its method expression, by the function
// for its shape; the number is how many arguments follow ctx (0 to 6;
// more travel as a struct):
//
//	returns (R, error)          Method, Method1, ... Method6
//	returns only error          VoidMethod, VoidMethod1, ... (R is Void)
//	takes a Port[R] first       PortMethod, PortMethod1, ... (answers on the port)
//
// The result, an Endpoint (Endpoint1, ...), is a small value: bind it in a
// package-level var or at the call. Its methods are the adverbs; the
// compiler checks the mesh's actor type, the arguments and the result:
//
//	Call       every member; a Future of a ValueMesh of the results, by rank
//	CallOne    the single member of a mesh of one (ErrNotOne otherwise)
//	Broadcast  every member, no reply
//	Stream     every member; the results as they arrive
//	Choose     one member picked at random
//	Send       every member; each answers on a Port the caller gives
//
// Accumulate folds a Stream's replies into one value as they arrive, from
// an identity and a combine function (Monarch's Accumulator); it stops at
// the first error, or when its ctx ends.
//
// Remote functions take 0 to 3 arguments (Remote, Remote1, ... Remote3)
// and have the adverbs Call, Send and Broadcast. Every argument's and
// result's type is checked as Register checks an endpoint's, when the
// function is registered.
//
// A wrong binding does not compile: "type func(c *Counter, ctx
// *actorrt.Context) error of (*Counter).Increment does not match inferred
// type func(*Counter, *actorrt.Context) (R, error)" means the endpoint
// returns only error, so VoidMethod is the one; "(cannot infer A and R)"
// on a method with arguments means the numbered form.
//
// # Spawn and Init arguments
//
// Init1, Init2 and Init3 bind an actor type's Init from its method
// expression, as Method1 binds an endpoint. The result (a Spawner1, ...)
// has Spawn, SpawnWith and GetOrSpawn, which take Init's arguments with
// the types Init declares, so the compiler checks them, and a constant
// takes the parameter's type (1 for a float64):
//
//	counters, err := actorrt.Init1((*Counter).Init).Spawn(ctx, procs, "counters", 0)
//
// Spawn[T], SpawnWith, SpawnPerProc and GetOrSpawn take Init's arguments
// as ...any: for an actor without Init, or an Init of more than three
// arguments (better, one struct). They compare the arguments' types with
// Init's parameters at the call, in the caller, before any proc does
// work, and refuse a mismatch with ErrBadArgs naming the parameter and
// both types; a constant there has its default type (1 is an int, which a
// float64 parameter refuses).
//
// # Contexts and ownership
//
// Every call that blocks, or creates something owned, takes a
// context.Context first: Spawn, SpawnPerProc, SpawnProcs, Stop,
// HostsFromConfig, FlushLogs, SetLogOptions. The context also says who
// owns a new mesh: an endpoint's *Context (or a context derived from it)
// makes the running actor the owner; any other context, the client (or,
// in a proc, the proc itself, whose failures go up to the client).
//
// A runtime is a value, not a property of the process: the ctx Main's
// function receives carries it, as does every endpoint's *Context and
// every context derived from them, and ThisHost, ThisProc, OpenChannel,
// Lookup, GetOrSpawn, Preempted, JobProcs and HostsFromConfig resolve it
// from the ctx they are given (ErrNotStarted for a ctx of none, such as
// context.Background()). A mesh, a port and a future belong to the
// runtime that made them, or that received them: a reference decoded
// from the wire binds to the runtime that decoded it. So two runtimes
// work side by side in one process, each its own job.
//
// # Meshes
//
// A mesh has an Extent: ordered, named dimensions such as {hosts: 2,
// gpus: 4}; ranks are row-major. Slice keeps a dimension with a smaller
// range, At fixes one and drops it. A slice is a view: members keep their
// rank (ActorInstance().Rank()), and a message sent to a slice tells each
// member its place in the slice (Context.MessageRank()). SpawnPerProc puts
// several actors of one mesh on each proc. An extent with no dimensions
// has exactly one point and prints as {}: ThisHost(ctx) is such a mesh, and
// its SpawnProcs gives just the dimensions asked for.
//
// # Names
//
// Every mesh spawned anywhere in the job registers its name with the
// client, which keeps the job's names. Lookup finds a mesh by name from
// any process:
//
//	counters, err := actorrt.Lookup[Counter](ctx, "counters")
//
// and GetOrSpawn gives a singleton of the job, spawned at the name's first
// use (Monarch's get_or_spawn_controller):
//
//	ctrl, err := actorrt.Init1((*Controller).Init).GetOrSpawn(ctx, "controller", cfg)
//
// The singleton is one actor on the client's own proc, owned by the
// client: it lives as long as the job, whichever actor asked first, and
// its failures go to the fault hook. First uses from many procs at once
// share one spawn, and every caller gets the same mesh; the arguments of
// later uses are checked, not used. A proc's Lookup or GetOrSpawn is a
// round trip to the client (at most the spawn timeout, or until ctx
// ends); the client's own sends nothing. A name no live mesh has is
// ErrNotFound, a name of a mesh of another type ErrWrongType (the error
// names both types); a first spawn that fails fails every caller waiting
// on it, and the next use tries again.
//
// Names are first-wins, not unique in the job: meshes of one name on
// different procs are allowed (on one proc they are not, ErrNameTaken),
// and the name belongs to the oldest live one, then to the next once that
// one is stopped. A name is freed when its mesh is stopped (Stop, or the
// end of its owner) or when all its procs were stopped; a mesh whose
// members failed keeps its name until it is stopped. A Spawn in a proc
// registers in a round trip, before it returns: a Lookup after it, from
// anywhere, finds the mesh.
//
// # Ordering and concurrency
//
// Messages from one sender to one actor are handled in the order they were
// sent, whatever the adverbs and slices used: a send to a mesh behaves as
// one send to each member. Each actor handles one message at a time
// (calls of its concurrent endpoints aside: see below); actors of one
// proc run concurrently. Every message travels over the job's bus,
// serialised with msgpack, even between actors of one proc.
//
// # Concurrent endpoints
//
// An endpoint named at Register with Concurrent (or ConcurrentLimit, to
// give its bound) is concurrent: each call of it runs in a goroutine of
// its own, with a Context of its own, and at most its bound of calls run
// at once in each actor (DefaultConcurrency, 64, unless ConcurrentLimit
// says otherwise; each concurrent endpoint has its own bound, each member
// of a mesh its own count). Any endpoint shape may be concurrent:
//
//	actorrt.Register[Generator](actorrt.ConcurrentLimit((*Generator).Generate, 8))
//
// The type's other endpoints (its ordinary ones), Init and Supervise keep
// the one-at-a-time rule. An actor's mailbox takes its messages in the
// order they arrive (one sender's in send order), one after another: an
// ordinary message runs there to its end before the next is taken; a
// concurrent call is started (its goroutine launched) and the next message
// is taken at once. So, between the two kinds:
//
//   - A concurrent call starts after every message that arrived before it
//     has ended (an ordinary one: its effects are visible to the call) or
//     started (a concurrent one). Init has ended before any call starts.
//   - Once started, calls run in parallel with every message that arrives
//     after them, of both kinds: an ordinary endpoint may run before,
//     during or after any line of a concurrent call that arrived before
//     it, and two concurrent calls started in order may reach their first
//     line in either order. State that both kinds touch needs a lock.
//   - Ordinary endpoints, Init and Supervise never run at the same time as
//     one another.
//   - When an endpoint's bound is reached, the mailbox waits for one of
//     its calls to end before it takes the next message, of either kind:
//     messages keep their order, so an ordinary endpoint sent then waits
//     too. Choose a bound above the calls expected at once where ordinary
//     endpoints must always answer. For the same reason, a concurrent call
//     that calls its own actor waits (until its ctx ends) while its bound
//     is reached.
//   - An error or panic is reported as an ordinary endpoint's: to the
//     caller as an *ActorError, and the actor lives on; with nobody
//     receiving it (a Broadcast), the actor fails and its owner gets a
//     *MeshFailure. The proc lives on.
//   - When the actor stops or fails, the Context of its running calls is
//     done; a call that returns afterwards still answers its caller. The
//     actor's Cleanup (and, on a restart in place, the new instance's
//     Init) waits for them and for its ctx.Go functions, at most the
//     cleanup timeout.
//
// Context.Go runs a function in a goroutine tied to the actor, from any
// endpoint: an error or panic there fails the actor and reaches its owner
// as a *MeshFailure (the proc lives on), and, in an endpoint that answers
// on a Port (PortMethod), is also the answer if the port still waits for
// one. A goroutine started with a go statement that panics ends the proc.
//
// # Errors
//
// Nothing here panics on bad input: a bad registration, an unregistered
// type, Init arguments that do not match, a slice out of range, CallOne on
// several actors, a name already in use, a Lookup of a missing name or an
// argument that cannot be decoded each give an error naming the problem; the sentinels are in
// errors.go. An endpoint's error or panic reaches the caller as an
// *ActorError with the actor, endpoint, message and, for a panic, the
// stack; the actor keeps serving. errors.Is finds in it the sentinel of
// this package the endpoint's error wrapped, if any.
//
// Arguments and results travel as msgpack, and Register refuses a type
// whose values would not arrive as sent (an unexported field, say), listing
// every problem of the actor type at once; see Register. A type whose
// fields should not travel as they are gets a codec of two functions
// with RegisterCodec, which keeps it off the type's method set. A mesh or
// Port among them arrives bound to the receiving runtime; one a program
// encodes itself (msgpack.Marshal) is decoded with Unmarshal(ctx, ...),
// which binds it to ctx's runtime. A slice or array of fixed-size numbers
// or bools ([]float32, []int64, [3]float64, a named type over one, alone
// or as a field) travels as one block of little-endian bytes, as fast as
// the same bytes as a []byte: a large one is not copied into the message,
// and reaches the endpoint (or the caller, for a result) in place where it
// arrives aligned, as one out of band does. Where several actors receive
// the same message (a Broadcast to a proc's members) each gets its own
// copy. Declare such a value with its type: an interface type (any,
// map[string]any) is refused when the endpoint is registered, and a block
// msgpack meets in one elsewhere is a decode error, since it would not
// come back as the typed slice.
// A program done with such a large result or argument may give its
// memory back (Recycle), so that the next one of about its size is read
// into memory already faulted in rather than fresh memory, whose page
// faults can cost more than the transfer on a virtual machine.
//
// # Supervision
//
// Every mesh has one owner: the actor whose endpoint spawned it, or the
// client. A failure nobody receives (an endpoint error or panic after a
// Broadcast, a proc that ends, a host agent that falls silent) reaches the
// owner as a *MeshFailure: an owner actor's Supervise method handles it or
// passes it up by failing too, and at the client the fault hook decides
// (WithFaultHook; by default: print it and exit 1). A client that exits
// with a failure (an unhandled MeshFailure, an error its function
// returned, an ExitError with a Failure, as spmd's) first reports what
// failed (Failure) to its launcher, on the job's failure subject, or, run
// without one, in the job's record. Calls waiting on a proc that ended
// fail with ErrProcFailed as soon as its host agent sees the exit. Supervise
// runs in the owner's mailbox like any message: it may call other actors
// and wait for them, but not itself.
//
// A ProcMesh of this program's procs (SpawnProcs without WithCommand) is
// supervised too, with or without actors on it: a proc of it that ends,
// not on request (it crashed, was killed, or its host was lost), is a
// MeshFailure of the proc mesh for its owner (the actor that spawned it,
// or the client), with ProcLost set, after the failures of the actors that
// were on it; unless a restart policy of a mesh on it starts a proc in
// its place, which the proc mesh's slot then holds. A proc mesh may have
// a restart policy of its own (WithProcRestart): a lost proc is replaced
// on its host, bounded as an actor mesh's restarts are, and its loss
// reaches the owner only past the limit or when the host is gone. A proc
// mesh does not die with the actor that spawned it; the ends of a
// WithCommand mesh's procs are told by Ends alone.
//
// # Restarts in place
//
// A mesh spawned with a RestartPolicy (SpawnWith) replaces a failed
// member in place: same mesh, name, id and rank, a new value of the type
// whose Init runs again with the spawn arguments. The policy gives a
// limit (MaxRestarts in a Window, counted per mesh), a backoff (doubling
// from Backoff up to MaxBackoff) and a scope: the member alone
// (RestartMember), the members along some dimensions through it
// (RestartAlong("gpus"): the failed member's row, a tensor-parallel
// group) or all of them (RestartMesh). DefaultRestartPolicy: the member
// alone, 3 restarts a minute, 100ms then doubling to 10s.
//
// What a restart promises, each promise with the tests that hold it:
//
//   - What survives: the mesh's identity, so every reference to it (the
//     owner's, one another actor holds) keeps working; not the state: the
//     new instance has only what its Init gives it, Init run after the
//     failed instance's Cleanup returned (or its bound passed), so a
//     checkpoint written there can be read back. TestRestartInPlace,
//     TestRestartAfterProcDeath, TestKillRestarts.
//   - The scope: the members of the failed one's group restart with it,
//     their calls failing and their state lost as its are, without a
//     failure report of their own; the other members are the same
//     instances. TestRestartAlong.
//   - What a caller in flight sees: a call in the failed member's mailbox,
//     or running, ends with ErrActorFailed, saying that it restarts; a
//     call in flight to a proc that ended fails with ErrProcFailed.
//     TestRestartInPlace, TestAdverbsDoNotWaitForRestart.
//   - What order later messages keep: one-way messages left in the failed
//     member's mailbox, and what is sent after the failure, reach the new
//     instance in order from each sender. When its proc ended, the
//     holder's later calls wait for the restart not in the adverb, which
//     returns at once, but queued in the holder's reference, in order: a
//     Call's Get waits as long as its ctx lets it; a queued Send that
//     cannot be sent fails its port; a queued Broadcast that cannot be
//     sent is logged, its members being failed ones their owner hears of.
//     That queue is bounded as a mailbox is (WithMailboxLimit): a call
//     past it is refused at once with ErrMailboxFull, by the adverb (a
//     Call's future fails with it). TestRestartInPlace,
//     TestAdverbsDoNotWaitForRestart, TestQueuedSendFailsToPort,
//     TestSendQueueBound. A ProcMesh's remote functions have no queue:
//     on a proc that ended they fail at once with ErrProcFailed, saying,
//     while a restart policy is starting a proc in its place, that it
//     is; a call once that proc is up reaches it.
//     TestRemoteWhileSlotReplaced.
//   - Past the limit: the failure goes to the owner as it would without a
//     policy, naming the limit, and the member stays failed (its calls end
//     with ErrActorFailed) until the owner restarts it by hand or stops
//     the mesh (or, spawned with GoOnWithout, the mesh goes on without
//     it: see below). TestRestartLimit.
//   - When the proc died: the member restarts on a new proc its host agent
//     starts in the old one's place (same environment, rank variables,
//     wrapper and CPU binding; a new pid), and stopping the proc mesh
//     stops that proc; if it fails again there, it restarts there, by its
//     policy or by hand. The proc is replaced once for every mesh that
//     had members there, whichever process owns each (the host agent
//     answers a second asker with the proc it started), and every
//     ProcMesh of the runtime that replaced it reaches the new proc
//     (Spawn, remote functions, Stop). TestRestartAfterProcDeath,
//     TestKillRestarts, TestRestartAgainAfterProcDeath,
//     TestProcReplacedForEveryMesh, TestProcReplacedAcrossOwners. The
//     runtime that started the new proc announces it to every process
//     that holds procs of that host agent, so a ProcMesh held elsewhere
//     (passed to an actor, or spawned by one) reaches it too, with no
//     call of its holder's. TestProcReplacedForAnotherHolder. The
//     ProcMesh's Ends delivers the end of every incarnation of every
//     slot, once each, naming the slot (Point) and the incarnation,
//     holding up to 4,096 beyond one per slot for a reader that is late
//     and counting any dropped past that (ProcEnd.Dropped).
//     TestProcEndsOfEveryIncarnation, TestProcEndsBounded.
//   - From a spare: a proc mesh spawned WithSpares(n) keeps n idle procs
//     per host; the slot of a proc that ended is handed to one of them
//     instead of a process started (it sets the slot's variables, RANK,
//     MONARCH_RANK_*, MASTER_*, WithProcEnv's, before any actor of the
//     slot runs there, and is bound to the slot's CPUs), every mesh that
//     had members on the ended proc restarts there, the pool is refilled,
//     and the spares stop with their mesh. With no spare up, a proc is
//     started as without; an idle spare that dies is replaced in the
//     pool, a failure of no one's. TestSpareTakesKilledSlot,
//     TestIdleSpareDiesReplaced, TestSparesRefused,
//     BenchmarkTwoMeshesFromSpare.
//   - When the host died: no proc can start in the old one's place; each
//     member's failure goes to the owner, naming the host's agent that
//     ended, and the members elsewhere go on. TestLoseHostWithPolicy,
//     TestLostHostSlotsToSpares, TestLoseHostGoOnWithout. A proc mesh
//     spawned WithSparesAnyHost (and WithSpares) has each lost slot taken
//     by an idle spare of another of its hosts instead, by the runtime
//     that spawned it: the slot keeps its coordinates and rank variables
//     and now runs on that host. TestLostHostSlotsToSpares.
//   - When the job ends: once the client's function returned, no restart
//     starts, and a restart the job's own stop cut short is no failure of
//     the program's (it is logged, not given to the fault hook).
//     TestExitAfterHandledKill.
//
// By hand, the owner restarts a mesh's failed members, with or without a
// policy: ActorMesh.Restart, on the mesh or a slice, from Supervise
// (return true) or the client. It restarts the members that failed and
// leaves the running ones, and those the policy is restarting, alone;
// with no failed member it is ErrNotFailed. A member whose Init fails
// again stays failed, and Restart says so. TestRestartByHandRestartsFailedOnly,
// TestRestartLimit. A failed member whose proc ended restarts on the proc
// its host agent starts in the old one's place (the slot's next
// incarnation, shared with every mesh that had members there, which the
// ProcMesh reaches); its error, if its host is gone too, wraps
// ErrProcFailed. TestRestartByHandProcEnded. Supervise can also Stop
// the failed mesh and Spawn a new one (on new procs, when the proc died).
// TestSuperviseRestartsAMesh. The meshes a failed instance owned are
// stopped, as for any failure (the script testdata/supervision/owner.txt).
// Actors may spawn procs and meshes from their endpoints, with the
// endpoint's ctx; they own what they spawn.
//
// A mesh spawned with SpawnOptions.GoOnWithout goes on without a member
// that cannot be restarted: its policy's restarts are spent, its host is
// gone, or the mesh has no policy and it failed (or its proc ended). That
// member is missing from then on (the script
// testdata/supervision/goon.txt):
//
//   - The owner is told once, by a MeshFailure with GoesOn set and a
//     reason that says the mesh goes on without it. It is news, not an
//     end: a fault hook that returns an error for it, or a Supervise that
//     returns false, only logs it. TestGoOnWithout,
//     TestGoOnWithoutKeepsTheJob, TestSuperviseGoesOn,
//     TestLoseHostGoOnWithout.
//   - The adverbs skip it: a Call answers without it, its ValueMesh
//     marking it (Missing lists the points, Has is false there, At fails
//     with ErrMissing; Values keeps rank order, the zero value there), and
//     the mark travels with the ValueMesh; Stream, and Accumulate over it,
//     yield nothing for it; Choose never picks it; CallOne to it fails at
//     once with ErrMissing, naming the member and why; Broadcast and Send
//     reach the others. No call waits for a missing member's proc.
//     TestGoOnWithout, TestLoseHostGoOnWithout, FuzzValueMesh.
//   - The owner's references know at once; another reference (Lookup's,
//     one an actor holds) learns it from the member's answers, which fail
//     with ErrMissing and mark it the same way, or, when the member's proc
//     ended, from the owner, asked as for a member that moved (the call
//     waits in the holder's queue meanwhile). TestGoOnWithout,
//     TestLoseHostGoOnWithout.
//   - A restart by hand (ActorMesh.Restart) of a missing member on a live
//     proc brings it back: it is no longer missing. TestGoOnWithout.
//
// # The end of an actor
//
// An actor may have a Cleanup method; Register finds it as it finds Init
// and Supervise, checks its signature, and does not make it an endpoint:
//
//	func (w *Writer) Cleanup(ctx *actorrt.Context, cause error) error { return w.buf.Flush() }
//
// Cleanup runs once, whatever ends the actor, and cause says what did:
// its mesh's Stop (cause wraps ErrStopped); a failure, an endpoint error
// or panic nobody received (cause wraps ErrActorFailed and the
// *MeshFailure its owner got); Context.Stop; the end of its proc, asked
// by ProcMesh.Stop or the end of the job (ErrStopped), after a SIGTERM to
// the client (the job's *PreemptNotice), or with its bus gone (ErrBus).
// It runs after the actor's last message, never beside one, on a
// goroutine of its own, and only for an actor whose Init succeeded. Its
// ctx is done at the cleanup timeout (WithCleanupTimeout, default 3s): a
// Cleanup that has not returned by then is abandoned (its goroutine is
// left to finish, or to end with its process) and a line of the system
// log, on stderr too, names the actor and the bound. An error it returns
// and a panic are logged as well. A mesh's Stop does not wait for its
// members' cleanups. A proc that ends runs the cleanups of all its actors
// at once, while its bus is still up, and waits for them at most one
// cleanup timeout, before its own stop timeout would kill it; at that
// point every actor of the proc is ending, so a Cleanup should call only
// actors elsewhere.
//
// An endpoint stops its own actor with ctx.Stop(): that member, not the
// rest of its mesh, once the current message returns. The messages queued
// behind it, and later calls, get ErrStopped naming the actor; then its
// Cleanup runs. It is a clean stop: the owner hears of no failure. The
// meshes the actor owns stop with it, as with any stop.
//
// # Processes
//
// Every process of a job that hosts actors (the client, and each proc) has
// a host agent of its own serving ThisHost(ctx): it
// starts procs, captures their output and watches them. Procs are started
// with a parent-death signal from a thread that lives as long as the
// process, so they die with their parent, and they exit when their bus
// connection is gone. A proc gets MONARCH_RANK_<DIM> and MONARCH_SIZE_<DIM>
// for each dimension of its mesh, and the torchrun variables. SpawnProcs'
// options shape each proc (WithProcEnv, WithWrapper, WithProcBind), name
// the mesh (WithName: its procs' lines carry the name, `[trainer 0]`), or
// run a command on each instead of this program (WithCommand: an SPMD
// job's procs, whose ends ProcMesh.Ends tells, which ProcMesh.Notify
// signals when the job is about to end, and whose last stderr lines
// ProcMesh.StderrTail gives).
//
// # The end of a job
//
// SIGINT to the client tears the job down at once. SIGTERM (monarch stop,
// a preemption) cancels Main's context with a *PreemptNotice as its cause
// and gives the program the job's stop grace to return; SIGUSR1 (a time
// limit ahead) is a warning only. Preempted delivers both notices, in the
// client and in every proc, so that actors can checkpoint too;
// RestartCount says how many times a requeued job ran before. A function
// that returns an *ExitError sets the exit status.
//
// # Seeing inside a running job
//
// The client serves the job's control socket while Main
// runs, in the state dir beside the job's record, and removes it at the
// end; `monarch stacks` asks it for the goroutine stacks of the procs of
// the proc meshes the client started (and its own). Every process has,
// beside the system actor of remote functions, an inspector that answers
// with its goroutine profile and, for each actor, the endpoint its mailbox
// runs now and since when (two atomic stores around each call: no
// allocation, no lock); the client asks the selected procs at once and
// lists those that do not answer within the request's bound. Command
// procs (WithCommand) have no runtime of ours: they are listed as such.
// `monarch profile` asks the inspectors the same way for CPU profiles,
// taken at once for the time asked, or heap profiles. While a CPU profile
// runs in a process, each actor call there (of an ordinary or concurrent
// endpoint, Init, Supervise, a ctx.Go function) runs with the pprof labels
// mesh, endpoint and rank of its actor, made once per actor and endpoint;
// when none runs, a call pays one atomic load for them. A call that began
// before the profile did is not labelled.
//
// `monarch exec` asks it to run a command on the job's hosts: the client
// asks the host agent of each (the launcher's, then its own host's) and
// passes their output on as it comes (internal/jobview's exec.go).
//
// The job state feed (what `monarch top` and the dashboard read) is the
// client's live model of the job (internal/jobview, told what the client
// sees through jobside.go): hosts, proc and actor meshes
// with each member's state, message counts, supervision events, each proc's
// CPU and memory, bus traffic, the last log lines, and per actor mesh and
// endpoint the calls handled, their errors and a histogram of handler times
// (all of it also served to Prometheus). A member's state comes from the
// client's supervision, or, for a mesh an actor elsewhere owns, from the
// member's proc. Counting costs the message path an atomic add per call
// sent and, per message handled, a store (and, for one call in eight, a
// clock read and two stores more); the procs' counts and figures are asked
// for only while the feed is read. MONARCH_FEED=off (or the job file's
// [feed] enabled = false) turns the counting off, read once at start.
//
// The client also serves the job's dashboard, a web page of that feed
// with the stacks of a member's proc and the tail of the job's log, on
// the address the job file's [dashboard] or $MONARCH_DASHBOARD gives
// (default a free loopback port), behind a token it makes; it prints the
// URL once on stderr and gives it to `monarch dashboard` when asked on
// the control socket.
//
// # Inside
//
// The client's runtime and a proc's (client.go, worker.go) share a core
// (runtime.go): its node on the bus (node.go, behind the link interface of
// link.go), the actors it hosts (localactors.go; an actor in actor.go,
// its mailbox in mailbox.go, its concurrent calls in concurrent.go, its
// end in cleanup.go), the host agent, supervision (supervision.go,
// driving the failureRouter state machine of failurerouter.go, which asks a mesh's
// restartPlanner of restartplan.go; restart.go and moves.go carry out
// restarts in place, on the member's proc or on a new one, and moves.go
// keeps the members a mesh goes on without; a call to a
// mesh whose member's restart has not settled waits in sendqueue.go, not
// in the adverb), the job's
// names (names.go: the client's registry), what it knows of the job's
// health (health.go, driving the pure table of actorrt/internal/liveness), who is
// a member of the job as the delivery layer asks (members.go: only a
// member's word makes messages lost; a sender this process never heard
// of is vouched for by the proc or agent its id names as its starter)
// and the inspector (inspect.go; profiles: profile.go; what a proc counts
// and answers of itself for the state feed: feed.go, feedcount.go). The
// client's view of its job (the model of the state feed, the control
// socket, `monarch exec`, the dashboard) is internal/jobview's; the
// client answers its questions and tells its model what it sees
// (jobside.go). An in-process cluster (actorrt/actortest) runs a client
// and procs as runtimes of one process, through the hooks of inproc.go
// (actorrt/internal/inproc): its procs are started by a
// hostagent.Starter, not executed. The
// state machines do no I/O; their tests are scripts in testdata/supervision
// (liveness's in its testdata, jobview's model in its testdata/model).
package actorrt

//go:generate go run ./internal/genadverbs
