package jobctl

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/monarch-go/monarch/internal/privfs"
)

// Bounds of the channel.
const (
	// MaxRequest bounds a request line.
	MaxRequest = 1 << 20
	// MaxAnswer bounds an answer line.
	MaxAnswer = 512 << 20
	// IOTimeout bounds reading a request and writing an answer.
	IOTimeout = 10 * time.Second
	// MaxOpTime bounds every op, whatever bound its request asks.
	MaxOpTime = 10 * time.Minute
)

// maxSocketPath is the longest path a unix socket may have on Linux
// (sun_path is 108 bytes, with the NUL).
const maxSocketPath = 107

// SocketPath is where the client of job, whose state dir is stateDir,
// serves its control socket: <stateDir>/<job>.sock, or, if that is too
// long for a socket, <runtime dir>/<hash>.sock (see RuntimeDir).
func SocketPath(stateDir, job string) string {
	if p := filepath.Join(stateDir, job+".sock"); len(p) <= maxSocketPath {
		return p
	}
	abs, err := filepath.Abs(stateDir)
	if err != nil {
		abs = stateDir
	}
	sum := sha256.Sum256([]byte(abs + "\x00" + job))
	return filepath.Join(RuntimeDir(), hex.EncodeToString(sum[:10])+".sock")
}

// RuntimeDir is the private dir of the sockets whose path in the state
// dir would be too long: $TMPDIR/monarch-<uid>/ctl.
func RuntimeDir() string {
	return filepath.Join(os.TempDir(), "monarch-"+strconv.Itoa(os.Getuid()), "ctl")
}

// Handler runs an op on its request's body and returns what is answered
// (encoded as JSON). ctx ends at the op's bound or when the server closes.
type Handler func(ctx context.Context, body json.RawMessage) (any, error)

// Op is a handler and the bound of its runs: Bound reads it from the
// request's body (nil, or 0 returned: MaxOpTime). An op that sends
// events before its answer has Stream instead of Handle (stream.go).
type Op struct {
	Handle Handler
	Bound  func(body json.RawMessage) time.Duration
	Stream StreamHandler
}

type request struct {
	Op   string          `json:"op"`
	Body json.RawMessage `json:"body,omitempty"`
}

type answer struct {
	Body  json.RawMessage `json:"body,omitempty"`
	Error string          `json:"error,omitempty"`
	// Event is one event of a streaming op, before its answer.
	Event json.RawMessage `json:"event,omitempty"`
}

// Server serves a control socket. Close it when the job ends.
type Server struct {
	path string
	ln   *net.UnixListener
	ops  map[string]Op

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	once   sync.Once
}

// Listen serves ops on the socket at path (see SocketPath): it makes the
// socket's dir private if it is missing, refuses one that is not, replaces
// a socket left there by a process that ended, and refuses one another
// process serves (the job's id is in use).
func Listen(path string, ops map[string]Op) (*Server, error) {
	if err := privfs.Dir(filepath.Dir(path)); err != nil {
		return nil, fmt.Errorf("jobctl: %w", err)
	}
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode().Type() != fs.ModeSocket {
			return nil, fmt.Errorf("jobctl: %s is there and is no socket: remove it if it is not yours to keep", path)
		}
		c, err := net.DialTimeout("unix", path, time.Second)
		if err == nil {
			c.Close()
			return nil, fmt.Errorf("jobctl: %s: another process serves it (is the job id in use?)", path)
		}
		os.Remove(path) // left by a client that was killed
	}
	ln, err := listenPrivate(path)
	if err != nil {
		return nil, fmt.Errorf("jobctl: %w", err)
	}
	ln.SetUnlinkOnClose(true)
	s := &Server{path: path, ln: ln, ops: ops}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.wg.Add(1)
	go s.serve()
	return s, nil
}

// listenPrivate listens on a unix socket at path that is 0600 from its
// first moment. The mode is set on the socket before it is bound: Linux
// gives the file bind makes the socket's own mode (less the umask). So
// there is no moment with a wider mode, and no change to the umask, which
// is the whole process's: a folder another goroutine made meanwhile would
// get the socket's mode.
func listenPrivate(path string) (*net.UnixListener, error) {
	fd, err := syscall.Socket(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("socket: %w", err)
	}
	f := os.NewFile(uintptr(fd), path)
	defer f.Close() // FileListener keeps a copy
	if err := syscall.Fchmod(fd, 0o600); err != nil {
		return nil, fmt.Errorf("socket: chmod: %w", err)
	}
	if err := syscall.Bind(fd, &syscall.SockaddrUnix{Name: path}); err != nil {
		return nil, &net.OpError{Op: "listen", Net: "unix", Addr: &net.UnixAddr{Name: path, Net: "unix"}, Err: os.NewSyscallError("bind", err)}
	}
	ln, err := listenBound(fd, f, path)
	if err != nil {
		os.Remove(path)
		return nil, err
	}
	return ln, nil
}

// listenBound listens on fd, bound at path (its file f), and checks that
// the socket file is 0600.
func listenBound(fd int, f *os.File, path string) (*net.UnixListener, error) {
	if err := syscall.Listen(fd, syscall.SOMAXCONN); err != nil {
		return nil, os.NewSyscallError("listen", err)
	}
	if fi, err := os.Lstat(path); err != nil || fi.Mode().Perm() != 0o600 {
		return nil, fmt.Errorf("%s: the socket is not 0600 once bound (%v, %v)", path, fi, err)
	}
	l, err := net.FileListener(f)
	if err != nil {
		return nil, err
	}
	return l.(*net.UnixListener), nil
}

// Path is the socket's path.
func (s *Server) Path() string { return s.path }

// Close stops serving: it removes the socket, ends the requests running
// (their contexts end) and waits for their handlers to return. Idempotent.
func (s *Server) Close() error {
	s.once.Do(func() {
		s.cancel()
		s.ln.Close()
		s.wg.Wait()
	})
	return nil
}

func (s *Server) serve() {
	defer s.wg.Done()
	for {
		c, err := s.ln.AcceptUnix()
		if err != nil {
			if s.ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return
			}
			time.Sleep(10 * time.Millisecond) // EMFILE and the like: do not spin
			continue
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			defer c.Close()
			s.handle(c)
		}()
	}
}

// handle serves one connection: one request, one answer.
func (s *Server) handle(c *net.UnixConn) {
	c.SetDeadline(time.Now().Add(IOTimeout))
	reply := func(a answer) {
		c.SetWriteDeadline(time.Now().Add(IOTimeout))
		b, err := json.Marshal(a)
		if err == nil && len(b) > MaxAnswer {
			b, err = json.Marshal(answer{Error: fmt.Sprintf("the answer is %d bytes; the bound is %d", len(b), MaxAnswer)})
		}
		if err != nil {
			b, _ = json.Marshal(answer{Error: err.Error()})
		}
		c.Write(append(b, '\n'))
	}
	if err := checkPeer(c); err != nil {
		reply(answer{Error: err.Error()})
		return
	}
	line, err := readLine(c, MaxRequest)
	if err != nil {
		reply(answer{Error: fmt.Sprintf("request: %v", err)})
		return
	}
	var req request
	if err := json.Unmarshal(line, &req); err != nil {
		reply(answer{Error: fmt.Sprintf("request: %v", err)})
		return
	}
	op, ok := s.ops[req.Op]
	if !ok {
		names := make([]string, 0, len(s.ops))
		for n := range s.ops {
			names = append(names, n)
		}
		slices.Sort(names)
		reply(answer{Error: fmt.Sprintf("unknown op %q; this job serves %s", req.Op, strings.Join(names, ", "))})
		return
	}
	bound := MaxOpTime
	if op.Bound != nil {
		if d := op.Bound(req.Body); d > 0 && d < bound {
			bound = d
		}
	}
	ctx, cancel := context.WithTimeout(s.ctx, bound)
	defer cancel()
	c.SetDeadline(time.Time{}) // the op's bound holds now
	var v any
	if op.Stream != nil {
		v, err = serveStream(ctx, cancel, c, op.Stream, req.Body)
	} else {
		v, err = op.Handle(ctx, req.Body)
	}
	if err != nil {
		reply(answer{Error: err.Error()})
		return
	}
	b, err := json.Marshal(v)
	if err != nil {
		reply(answer{Error: err.Error()})
		return
	}
	reply(answer{Body: b})
}

// checkPeer refuses a connection from another user (SO_PEERCRED).
func checkPeer(c *net.UnixConn) error {
	uid, err := peerUID(c)
	if err != nil {
		return fmt.Errorf("%w: cannot tell who connects: %v", ErrRefused, err)
	}
	if uid != os.Getuid() {
		return fmt.Errorf("%w: uid %d is not the job's user (uid %d)", ErrRefused, uid, os.Getuid())
	}
	return nil
}

func peerUID(c *net.UnixConn) (int, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return -1, err
	}
	var cred *syscall.Ucred
	var cerr error
	if err := raw.Control(func(fd uintptr) {
		cred, cerr = syscall.GetsockoptUcred(int(fd), syscall.SOL_SOCKET, syscall.SO_PEERCRED)
	}); err != nil {
		return -1, err
	}
	if cerr != nil {
		return -1, cerr
	}
	return int(cred.Uid), nil
}

// readLine reads one line of at most limit bytes (without its newline),
// through a bufio.Reader of 64 KiB: r itself, when it is one (to read
// more lines after), else a new one.
func readLine(r io.Reader, limit int) ([]byte, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	var buf bytes.Buffer
	for {
		chunk, err := br.ReadSlice('\n')
		if n := buf.Len() + len(chunk); n > limit+1 || n > limit && err != nil {
			return nil, fmt.Errorf("%w: more than %d bytes", ErrTooLarge, limit)
		}
		buf.Write(chunk)
		switch {
		case err == nil:
			return bytes.TrimSuffix(buf.Bytes(), []byte{'\n'}), nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF) && buf.Len() > 0:
			return nil, fmt.Errorf("cut short after %d bytes", buf.Len())
		default:
			return nil, err
		}
	}
}

// Call asks the server at path to run op on req and decodes its answer
// into resp (a pointer; nil to ignore it). It refuses a socket served by
// another user. ctx bounds the whole exchange. A server that is not there
// is ErrNotServing; an error the op returned comes back as an error with
// its text.
func Call(ctx context.Context, path, op string, req, resp any) error {
	return CallStream(ctx, path, op, req, nil, nil, resp)
}

// wrapCtx says a failed read or write was ctx's end, when it was.
func wrapCtx(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}
