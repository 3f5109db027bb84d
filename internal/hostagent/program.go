package hostagent

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"

	"github.com/monarch-go/monarch/internal/bincache"
)

// The job's program (Config.Program) is opened once, checked (it and its
// folders are this user's or root's and writable by no one else; with
// Config.ProgramSum, its sha256 is that), and every proc runs from that
// descriptor (bincache.OpenProgram): what runs is what was checked, even
// if its path is changed meanwhile. The proc gets it as its file 3 and
// runs /proc/self/fd/3, which a wrapper runs as well, and an interpreter
// reads (a script): the proc keeps file 3 open, read-only, on its own
// program. Hashing once per agent keeps the start of a proc as fast as
// from a path.

// programFD is the file number of the program in a proc started from it:
// its first and only extra file.
const programFD = 3

// errClosed is the program of an agent that closed.
var errClosed = errors.New("the host agent is closing")

// program is an agent's program, opened on first use and kept open until
// the agent closes.
type program struct {
	path, sum string

	mu   sync.Mutex
	done bool
	p    *bincache.Program
	err  error
}

// get opens and checks the program the first time; every call returns
// what that did.
func (o *program) get() (*bincache.Program, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if !o.done {
		o.p, o.err = bincache.OpenProgram(o.path, o.sum)
		o.done = true
	}
	return o.p, o.err
}

// close closes the program's descriptor; later gets fail.
func (o *program) close() {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.p != nil {
		o.p.Close()
	}
	o.p, o.err, o.done = nil, errClosed, true
}

// refused is a program that failed its checks, in words that say what to
// do about it.
func refused(path string, err error) error {
	hint := ""
	switch {
	case errors.Is(err, bincache.ErrUnsafe):
		hint = "; monarch runs a program only if no other user could have put it there or changed it: " +
			"move it to a folder of yours that only you can write, or let monarch send it " +
			`(hosts file: [ship] send = "auto", the default, or true)`
	case errors.Is(err, bincache.ErrChanged):
		hint = "; it changed on this host since the launcher checked it: run the job again"
	}
	return fmt.Errorf("the program %s is refused: %v%s", path, err, hint)
}

// fromProgram makes cmd run p from its descriptor rather than its path:
// argv[at] is the program (after a wrapper, if any).
func fromProgram(cmd *exec.Cmd, p *bincache.Program, at int) {
	cmd.ExtraFiles = []*os.File{p.File}
	if at == 0 {
		cmd.Path, cmd.Err = bincache.ExecPath(programFD), nil
		return
	}
	cmd.Args[at] = bincache.ExecPath(programFD) // the wrapper runs it by this path
}
