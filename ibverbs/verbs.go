//go:build verbs && cgo

package ibverbs

// The verbs backend: one-sided RDMA READ, WRITE and atomics through
// libibverbs (rdma-core), built with `-tags verbs` where libibverbs-dev
// is installed. Each process opens the first device's first active port,
// registers every buffer it owns (the handle then carries its address and
// rkey) and keeps one RC queue pair per owner it talks to; the queue
// pairs' connection data (LID, GID, QPN, PSN) is exchanged over the
// owner's TCP server, the capability of a handle's key, in one request.
// Transfers go through a registered staging area of the connection, a
// chunk at a time, one work request in flight per connection; every wait
// for a completion is bounded by ctx and transferBound.

/*
#cgo LDFLAGS: -libverbs
#include <infiniband/verbs.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	uint8_t port;
	int gid_index;
	struct ibv_port_attr port_attr;
	union ibv_gid gid;
} mon_dev;

// The connection data of a queue pair.
typedef struct {
	uint16_t lid;
	uint8_t gid[16];
	uint32_t qpn;
	uint32_t psn;
} mon_qp_info;

// mon_open opens the first device with an active port: 0 on success, -1
// when there is no device, -2 when none has an active port, -3 when the
// device cannot be set up.
static int mon_open(mon_dev *d) {
	int n = 0;
	struct ibv_device **list = ibv_get_device_list(&n);
	if (list == NULL || n == 0) {
		if (list) ibv_free_device_list(list);
		return -1;
	}
	int rc = -2;
	for (int i = 0; i < n && rc != 0; i++) {
		struct ibv_context *ctx = ibv_open_device(list[i]);
		if (!ctx) continue;
		struct ibv_device_attr da;
		if (ibv_query_device(ctx, &da)) { ibv_close_device(ctx); continue; }
		for (uint8_t p = 1; p <= da.phys_port_cnt; p++) {
			struct ibv_port_attr pa;
			if (ibv_query_port(ctx, p, &pa) || pa.state != IBV_PORT_ACTIVE) continue;
			d->ctx = ctx;
			d->port = p;
			d->port_attr = pa;
			d->gid_index = 0;
			if (ibv_query_gid(ctx, p, 0, &d->gid)) memset(&d->gid, 0, sizeof d->gid);
			rc = 0;
			break;
		}
		if (rc != 0) ibv_close_device(ctx);
	}
	ibv_free_device_list(list);
	if (rc != 0) return rc;
	d->pd = ibv_alloc_pd(d->ctx);
	d->cq = d->pd ? ibv_create_cq(d->ctx, 64, NULL, NULL, 0) : NULL;
	if (!d->pd || !d->cq) {
		if (d->pd) ibv_dealloc_pd(d->pd);
		ibv_close_device(d->ctx);
		return -3;
	}
	return 0;
}

static struct ibv_mr *mon_reg(mon_dev *d, void *addr, size_t len) {
	return ibv_reg_mr(d->pd, addr, len, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ |
		IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC);
}

// mon_qp_create makes an RC queue pair in INIT on cq and fills in its
// connection data.
static struct ibv_qp *mon_qp_create(mon_dev *d, struct ibv_cq *cq, uint32_t psn, mon_qp_info *me) {
	struct ibv_qp_init_attr ia;
	memset(&ia, 0, sizeof ia);
	ia.send_cq = cq;
	ia.recv_cq = cq;
	ia.qp_type = IBV_QPT_RC;
	ia.cap.max_send_wr = 4;
	ia.cap.max_recv_wr = 1;
	ia.cap.max_send_sge = 1;
	ia.cap.max_recv_sge = 1;
	struct ibv_qp *qp = ibv_create_qp(d->pd, &ia);
	if (!qp) return NULL;
	struct ibv_qp_attr a;
	memset(&a, 0, sizeof a);
	a.qp_state = IBV_QPS_INIT;
	a.pkey_index = 0;
	a.port_num = d->port;
	a.qp_access_flags = IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS)) {
		ibv_destroy_qp(qp);
		return NULL;
	}
	me->lid = d->port_attr.lid;
	memcpy(me->gid, d->gid.raw, 16);
	me->qpn = qp->qp_num;
	me->psn = psn;
	return qp;
}

// mon_qp_connect moves qp to RTR, towards peer, then RTS.
static int mon_qp_connect(mon_dev *d, struct ibv_qp *qp, uint32_t my_psn, mon_qp_info *peer) {
	struct ibv_qp_attr a;
	memset(&a, 0, sizeof a);
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = d->port_attr.active_mtu;
	a.dest_qp_num = peer->qpn;
	a.rq_psn = peer->psn;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 12;
	a.ah_attr.dlid = peer->lid;
	a.ah_attr.port_num = d->port;
	// RoCE has no LIDs: route by GID.
	static const uint8_t zero[16];
	if (memcmp(peer->gid, zero, 16) != 0) {
		a.ah_attr.is_global = 1;
		memcpy(a.ah_attr.grh.dgid.raw, peer->gid, 16);
		a.ah_attr.grh.sgid_index = d->gid_index;
		a.ah_attr.grh.hop_limit = 1;
	}
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
			IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
		return -1;
	memset(&a, 0, sizeof a);
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.sq_psn = my_psn;
	a.max_rd_atomic = 1;
	return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
		IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC) ? -2 : 0;
}

// mon_post posts one signaled work request: op 'r' RDMA READ, 'w' RDMA
// WRITE, 'a' fetch-and-add (a), 'c' compare (a) and swap (b).
static int mon_post(struct ibv_qp *qp, char op, void *local, uint32_t len, uint32_t lkey,
		uint64_t raddr, uint32_t rkey, uint64_t a, uint64_t b) {
	struct ibv_sge sge = { .addr = (uintptr_t)local, .length = len, .lkey = lkey };
	struct ibv_send_wr wr, *bad = NULL;
	memset(&wr, 0, sizeof wr);
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.send_flags = IBV_SEND_SIGNALED;
	switch (op) {
	case 'r': wr.opcode = IBV_WR_RDMA_READ; break;
	case 'w': wr.opcode = IBV_WR_RDMA_WRITE; break;
	case 'a': wr.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD; break;
	case 'c': wr.opcode = IBV_WR_ATOMIC_CMP_AND_SWP; break;
	default: return -1;
	}
	if (op == 'r' || op == 'w') {
		wr.wr.rdma.remote_addr = raddr;
		wr.wr.rdma.rkey = rkey;
	} else {
		wr.wr.atomic.remote_addr = raddr;
		wr.wr.atomic.rkey = rkey;
		wr.wr.atomic.compare_add = a;
		wr.wr.atomic.swap = b;
	}
	return ibv_post_send(qp, &wr, &bad);
}

// mon_poll polls one completion: 1 with its status, 0 for none yet, < 0
// on error.
static int mon_poll(struct ibv_cq *cq, int *status) {
	struct ibv_wc wc;
	int n = ibv_poll_cq(cq, 1, &wc);
	if (n > 0) *status = wc.status;
	return n;
}

static const char *mon_wc_str(int status) { return ibv_wc_status_str((enum ibv_wc_status)status); }
*/
import "C"

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"sync"
	"time"
	"unsafe"
)

// stagingBytes is a connection's registered staging area: transfers go
// through it a chunk at a time.
const stagingBytes = 4 << 20

// qpInfoLen is the wire size of a queue pair's connection data.
const qpInfoLen = 2 + 16 + 4 + 4

func init() {
	register("verbs", func(p *process) backend {
		v := &verbsBackend{p: p, conns: map[string]*verbsConn{}}
		p.registrars = append(p.registrars, v)
		p.qpHandshake = v.accept
		return v
	})
}

type verbsBackend struct {
	p *process

	openOnce sync.Once
	dev      *C.mon_dev
	why      error // the device is not usable: why

	mu    sync.Mutex
	conns map[string]*verbsConn // by owner address
	mrs   map[uint64]*C.struct_ibv_mr
}

// device opens the device once; a process without one says so once, on
// stderr, as the reason its transfers take another backend.
func (v *verbsBackend) device() (*C.mon_dev, error) {
	v.openOnce.Do(func() {
		d := (*C.mon_dev)(C.calloc(1, C.sizeof_mon_dev))
		switch C.mon_open(d) {
		case 0:
			v.dev = d
			return
		case -1:
			v.why = errors.New("no RDMA device (ibv_get_device_list found none)")
		case -2:
			v.why = errors.New("no RDMA device with an active port")
		default:
			v.why = errors.New("the RDMA device could not be set up (protection domain, completion queue)")
		}
		C.free(unsafe.Pointer(d))
		fmt.Fprintf(os.Stderr, "ibverbs: %v: transfers use shm on a host and tcp between hosts\n", v.why)
	})
	return v.dev, v.why
}

func (*verbsBackend) name() string { return "verbs" }

func (v *verbsBackend) usable(h Handle) error {
	if _, err := v.device(); err != nil {
		return err
	}
	if h.RKey == 0 {
		return errors.New("the owner registered its buffer with no RDMA device")
	}
	return nil
}

// registerBuffer registers b's memory with the device, if there is one,
// and puts its address and rkey in the handle.
func (v *verbsBackend) registerBuffer(b *Buffer) {
	d, err := v.device()
	if err != nil {
		return
	}
	mr := C.mon_reg(d, unsafe.Pointer(unsafe.SliceData(b.mem)), C.size_t(len(b.mem)))
	if mr == nil {
		return // the handle has no rkey: peers use another backend
	}
	v.mu.Lock()
	if v.mrs == nil {
		v.mrs = map[uint64]*C.struct_ibv_mr{}
	}
	v.mrs[b.handle.Key] = mr
	v.mu.Unlock()
	b.handle.RKey = uint32(mr.rkey)
	b.handle.RAddr = uint64(uintptr(unsafe.Pointer(unsafe.SliceData(b.mem))))
}

// unregisterBuffer deregisters b's memory (before it is freed).
func (v *verbsBackend) unregisterBuffer(b *Buffer) {
	v.mu.Lock()
	mr := v.mrs[b.handle.Key]
	delete(v.mrs, b.handle.Key)
	v.mu.Unlock()
	if mr != nil {
		C.ibv_dereg_mr(mr)
	}
}

// verbsConn is a connected queue pair to one owner, with its own
// completion queue (a completion polled is this connection's) and staging
// area; one work request at a time.
type verbsConn struct {
	mu      sync.Mutex
	qp      *C.struct_ibv_qp
	cq      *C.struct_ibv_cq
	staging unsafe.Pointer
	mr      *C.struct_ibv_mr
}

func randomPSN() uint32 {
	var b [4]byte
	rand.Read(b[:])
	return binary.LittleEndian.Uint32(b[:]) & 0xffffff
}

func encodeQP(i C.mon_qp_info) []byte {
	b := make([]byte, qpInfoLen)
	binary.LittleEndian.PutUint16(b[0:], uint16(i.lid))
	for k := range 16 {
		b[2+k] = byte(i.gid[k])
	}
	binary.LittleEndian.PutUint32(b[18:], uint32(i.qpn))
	binary.LittleEndian.PutUint32(b[22:], uint32(i.psn))
	return b
}

func decodeQP(b []byte) (C.mon_qp_info, error) {
	var i C.mon_qp_info
	if len(b) != qpInfoLen {
		return i, fmt.Errorf("queue pair data of %d bytes, want %d", len(b), qpInfoLen)
	}
	i.lid = C.uint16_t(binary.LittleEndian.Uint16(b[0:]))
	for k := range 16 {
		i.gid[k] = C.uint8_t(b[2+k])
	}
	i.qpn = C.uint32_t(binary.LittleEndian.Uint32(b[18:]))
	i.psn = C.uint32_t(binary.LittleEndian.Uint32(b[22:]))
	return i, nil
}

// newConn makes a queue pair with a completion queue and a staging
// area; info is its connection data.
func (v *verbsBackend) newConn(d *C.mon_dev) (*verbsConn, C.mon_qp_info, uint32, error) {
	var info C.mon_qp_info
	psn := randomPSN()
	cq := C.ibv_create_cq(d.ctx, 8, nil, nil, 0)
	if cq == nil {
		return nil, info, 0, errors.New("ibverbs: create a completion queue")
	}
	qp := C.mon_qp_create(d, cq, C.uint32_t(psn), &info)
	if qp == nil {
		C.ibv_destroy_cq(cq)
		return nil, info, 0, errors.New("ibverbs: create a queue pair")
	}
	staging := C.calloc(1, stagingBytes)
	mr := C.mon_reg(d, staging, stagingBytes)
	if mr == nil {
		C.ibv_destroy_qp(qp)
		C.ibv_destroy_cq(cq)
		C.free(staging)
		return nil, info, 0, errors.New("ibverbs: register a staging area")
	}
	return &verbsConn{qp: qp, cq: cq, staging: staging, mr: mr}, info, psn, nil
}

// accept is the owner's side of a handshake on its TCP server: a queue
// pair for the peer whose connection data req is, connected to it; the
// answer is its own.
func (v *verbsBackend) accept(req []byte) ([]byte, error) {
	d, err := v.device()
	if err != nil {
		return nil, err
	}
	peer, err := decodeQP(req)
	if err != nil {
		return nil, err
	}
	c, info, psn, err := v.newConn(d)
	if err != nil {
		return nil, err
	}
	if C.mon_qp_connect(d, c.qp, C.uint32_t(psn), &peer) != 0 {
		return nil, errors.New("ibverbs: connect the queue pair")
	}
	// The owner's queue pair is the target of one-sided work only: it is
	// kept for the life of the process.
	v.mu.Lock()
	v.conns["accepted-"+fmt.Sprint(uint32(info.qpn))] = c
	v.mu.Unlock()
	return encodeQP(info), nil
}

// conn is the connected queue pair to h's owner, made at first use: the
// handshake goes over the owner's TCP server.
func (v *verbsBackend) conn(ctx context.Context, h Handle) (*verbsConn, error) {
	d, err := v.device()
	if err != nil {
		return nil, err
	}
	v.mu.Lock()
	c := v.conns[h.Addr]
	v.mu.Unlock()
	if c != nil {
		return c, nil
	}
	c, info, psn, err := v.newConn(d)
	if err != nil {
		return nil, err
	}
	answer, err := tcpHandshake(ctx, h, encodeQP(info))
	if err != nil {
		return nil, err
	}
	peer, err := decodeQP(answer)
	if err != nil {
		return nil, err
	}
	if C.mon_qp_connect(d, c.qp, C.uint32_t(psn), &peer) != 0 {
		return nil, errors.New("ibverbs: connect the queue pair")
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if first := v.conns[h.Addr]; first != nil {
		return first, nil
	}
	v.conns[h.Addr] = c
	return c, nil
}

// do posts one work request and waits for its completion, bounded.
func (v *verbsBackend) do(ctx context.Context, c *verbsConn, op byte, n int, raddr uint64, rkey uint32, a, b uint64) error {
	if rc := C.mon_post(c.qp, C.char(op), c.staging, C.uint32_t(n), c.mr.lkey, C.uint64_t(raddr), C.uint32_t(rkey), C.uint64_t(a), C.uint64_t(b)); rc != 0 {
		return fmt.Errorf("ibverbs: post a work request: error %d", int(rc))
	}
	deadline := time.Now().Add(transferBound)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	for i := 0; ; i++ {
		var status C.int
		switch n := C.mon_poll(c.cq, &status); {
		case n < 0:
			return errors.New("ibverbs: poll the completion queue")
		case n > 0 && status != C.IBV_WC_SUCCESS:
			return fmt.Errorf("ibverbs: work request failed: %s", C.GoString(C.mon_wc_str(status)))
		case n > 0:
			return nil
		}
		if i > 1000 {
			if time.Now().After(deadline) || ctx.Err() != nil {
				// The work request may still complete; the queue pair
				// cannot be trusted any more.
				return fmt.Errorf("ibverbs: no completion: %w", context.DeadlineExceeded)
			}
			runtime.Gosched()
		}
	}
}

func (v *verbsBackend) read(ctx context.Context, h Handle, off int, dst []byte) error {
	if len(dst) == 0 {
		// Handle.Check: the queue pair, one per owner, says nothing of
		// the key; the owner's tcp server does.
		return checkOwner(ctx, h, off)
	}
	return v.copy(ctx, h, off, dst, false)
}

func (v *verbsBackend) write(ctx context.Context, h Handle, off int, src []byte) error {
	return v.copy(ctx, h, off, src, true)
}

// drop forgets a connection whose work request failed or timed out: its
// queue pair is in error, or a completion may still come. It is not
// destroyed (a late completion would touch freed memory); the next
// transfer to that owner connects again.
func (v *verbsBackend) drop(h Handle, c *verbsConn) {
	v.mu.Lock()
	if v.conns[h.Addr] == c {
		delete(v.conns, h.Addr)
	}
	v.mu.Unlock()
}

// copy moves b through the connection's staging area, a chunk at a time.
func (v *verbsBackend) copy(ctx context.Context, h Handle, off int, b []byte, write bool) error {
	c, err := v.conn(ctx, h)
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	staging := unsafe.Slice((*byte)(c.staging), stagingBytes)
	for done := 0; done < len(b); {
		n := min(len(b)-done, stagingBytes)
		op := byte('r')
		if write {
			op = 'w'
			copy(staging, b[done:done+n])
		}
		if err := v.do(ctx, c, op, n, h.RAddr+uint64(off+done), h.RKey, 0, 0); err != nil {
			v.drop(h, c)
			return err
		}
		if !write {
			copy(b[done:done+n], staging)
		}
		done += n
	}
	return nil
}

func (v *verbsBackend) atomic(ctx context.Context, h Handle, off int, op atomicOp, a, b uint64) (uint64, error) {
	c, err := v.conn(ctx, h)
	if err != nil {
		return 0, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := v.do(ctx, c, byte(op), 8, h.RAddr+uint64(off), h.RKey, a, b); err != nil {
		v.drop(h, c)
		return 0, err
	}
	return *(*uint64)(c.staging), nil
}

// checkOwner asks h's owner, on a connection of its own, for no bytes at
// off of h's buffer: whether it serves it (Handle.Check).
func checkOwner(ctx context.Context, h Handle, off int) error {
	c, err := dialOwner(ctx, h.Addr, h.TLS, connectBound)
	if err != nil {
		return err
	}
	defer c.Close()
	pc, stop := paced(ctx, c, clientProgressBound)
	defer stop()
	return pc.why(exchange(pc, h, off, nil, false))
}

// tcpHandshake sends this process's queue pair data to h's owner and
// returns the owner's.
func tcpHandshake(ctx context.Context, h Handle, req []byte) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	c, err := dialOwner(ctx, h.Addr, h.TLS, connectBound)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		c.SetDeadline(dl)
	}
	var hdr [headerLen]byte
	hdr[0] = 'q'
	binary.LittleEndian.PutUint64(hdr[1:9], h.Key)
	binary.LittleEndian.PutUint64(hdr[17:25], uint64(len(req)))
	if _, err := (&net.Buffers{hdr[:], req}).WriteTo(c); err != nil {
		return nil, err
	}
	var ans [3]byte
	if _, err := io.ReadFull(c, ans[:]); err != nil {
		return nil, err
	}
	if err := statusErr(ans[0]); err != nil {
		return nil, fmt.Errorf("ibverbs: the owner at %s refused the queue pair: %w", h.Addr, err)
	}
	out := make([]byte, binary.LittleEndian.Uint16(ans[1:]))
	if len(out) > maxHandshake {
		return nil, fmt.Errorf("ibverbs: a handshake answer of %d bytes", len(out))
	}
	_, err = io.ReadFull(c, out)
	return out, err
}
