package ibverbs

import (
	"os"
	"strings"
	"sync"
	"sync/atomic"
)

// process is what this process keeps for one-sided memory, in one value.
// It exists once per process because each thing it holds is tied to the
// process, not to a buffer or a handle:
//
//   - the buffers this process owns, by key: its TCP server answers for
//     them, and transfers from this process to its own buffers find them;
//   - the TCP server itself: peers dial one address per owning process;
//   - the backends compiled in, which keep their caches (shm's mappings of
//     other processes' memory, tcp's idle connections) for every handle
//     used here;
//   - the backend each handle is bound to here: the choice depends on
//     this process (its host, its devices, its environment), so a handle,
//     a plain value passed between processes, cannot carry it.
type process struct {
	pid      int
	boot     string    // this machine's kernel boot id, "" if unknown
	backends []backend // those compiled in, in preference order

	mu    sync.Mutex
	owned map[uint64]*Buffer
	tcp   *tcpServer // nil until the first buffer

	// registrars register every buffer this process owns with what they
	// drive (an RDMA device), set by backends at construction.
	registrars []registrar
	// qpHandshake, when set, answers a peer's queue pair data on the TCP
	// server (the verbs backend).
	qpHandshake func(req []byte) ([]byte, error)

	boundMu sync.RWMutex
	bound   map[Handle]*binding
}

// binding is the backend a handle is bound to here, and whether a use of
// the handle through it succeeded: the handle's owner served its buffer.
type binding struct {
	backend
	proven atomic.Bool
}

// thisProcess is the process value, made at first use.
var thisProcess = sync.OnceValue(newProcess)

func newProcess() *process {
	p := &process{
		pid:   os.Getpid(),
		boot:  readBootID(),
		owned: map[uint64]*Buffer{},
		bound: map[Handle]*binding{},
	}
	for _, name := range preference {
		if newBackend, ok := compiled[name]; ok {
			p.backends = append(p.backends, newBackend(p))
		}
	}
	return p
}

func readBootID() string {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// registrar registers a buffer's memory with something a backend drives
// (an RDMA device) and writes what peers need into its handle.
type registrar interface {
	registerBuffer(b *Buffer)
	unregisterBuffer(b *Buffer)
}

// own registers b and makes it findable by its key; disown undoes it.
func (p *process) own(b *Buffer) {
	for _, r := range p.registrars {
		r.registerBuffer(b)
	}
	p.mu.Lock()
	p.owned[b.handle.Key] = b
	p.mu.Unlock()
}

func (p *process) disown(b *Buffer) {
	p.mu.Lock()
	delete(p.owned, b.handle.Key)
	p.mu.Unlock()
	for _, r := range p.registrars {
		r.unregisterBuffer(b)
	}
}

// lookup is the buffer this process owns under key, or nil.
func (p *process) lookup(key uint64) *Buffer {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.owned[key]
}

// bind is the backend for transfers through h from this process: the one
// h was bound to, or, at h's first use here, the one choose picks, which
// h keeps from then on (until unbind). A failed choice binds nothing.
func (p *process) bind(h Handle) (*binding, error) {
	if b := p.binding(h); b != nil {
		return b, nil
	}
	be, err := choose(os.Getenv(EnvBackend), h, p.backends)
	if err != nil {
		return nil, err
	}
	p.boundMu.Lock()
	defer p.boundMu.Unlock()
	if first := p.bound[h]; first != nil {
		return first, nil // another transfer bound h meanwhile
	}
	b := &binding{backend: be}
	p.bound[h] = b
	return b, nil
}

// binding is h's binding here, or nil.
func (p *process) binding(h Handle) *binding {
	p.boundMu.RLock()
	defer p.boundMu.RUnlock()
	return p.bound[h]
}

// settle ends a use of h through b: a failed one unbinds h, so that a
// handle that does not work (its buffer gone, its owner out of reach, or
// stalled, or made up) leaves nothing here; one that succeeded proves
// it. It returns err.
func (p *process) settle(h Handle, b *binding, err error) error {
	switch {
	case err != nil:
		p.unbind(h)
	case !b.proven.Load():
		b.proven.Store(true)
	}
	return err
}

// unbind forgets h's backend: a use of it failed, or its reader is done
// with it (Forget), and so the entry would only take room.
func (p *process) unbind(h Handle) {
	p.boundMu.Lock()
	delete(p.bound, h)
	p.boundMu.Unlock()
}
