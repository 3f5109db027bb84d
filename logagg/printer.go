package logagg

import (
	"cmp"
	"io"
	"time"
)

// Printer prints proc lines for a user: each line at once as
// `[3] step 100 loss=0.42`, or, for lines given an aggregation window,
// each group of similar lines once per window as
// `[37 similar log lines] [3] step 100 loss=0.42`. Once lines of a second
// proc mesh have come, prefixes name the mesh: `[trainer 3]`. Lines of
// stderr go to its stderr writer, all others to its stdout writer.
//
// It keeps whole lines and writes them in chunks of at most 4 KiB
// (PIPE_BUF on Linux, the size up to which the kernel keeps a write to a
// pipe whole): a program that writes to the same stdout, such as the
// client's own main function, never lands inside a line. A line alone
// longer than that is written on its own. Lines are written in the order
// they are printed across both writers: a line of the other stream first
// writes out the ones before it.
//
// A Printer has no clock and no goroutine: time comes in as arguments,
// and its owner calls Tick now and then (the client from its printer
// goroutine, `monarch logs` from its read loop) to close the windows that
// are due and write out what is kept. It is not safe for concurrent use.
type Printer struct {
	out, err           io.Writer
	colorOut, colorErr bool
	windows            []*printWindow // in order of first use
	buf                []byte         // whole lines not written yet, all of one stream
	stream             Stream         // the stream of the lines in buf
	// firstMesh is the mesh of the first line that had one; manyMeshes
	// is set once a line of another came: from then on prefixes name
	// the mesh ([trainer 0]), a job of one mesh keeps [0].
	firstMesh  string
	manyMeshes bool
}

// printWindow groups the lines of one window length.
type printWindow struct {
	length time.Duration
	agg    *Aggregator
	due    time.Time // when the open window ends; set while agg has lines
}

// chunk is the most a Printer writes at once (PIPE_BUF on Linux).
const chunk = 4096

// NewPrinter returns a Printer writing to stdout and stderr, each colored
// when [ColorFor] says so (never when it is not an *os.File).
func NewPrinter(stdout, stderr io.Writer) *Printer {
	return &Printer{out: stdout, err: stderr, colorOut: colorWriter(stdout), colorErr: colorWriter(stderr)}
}

// SetColor sets whether lines printed to stdout and to stderr are
// colored, in place of what NewPrinter found.
func (p *Printer) SetColor(stdout, stderr bool) { p.colorOut, p.colorErr = stdout, stderr }

// Print prints l: kept for the next write when window is 0 or less, else
// added to the group of its template in the window of that length. A
// window opens with its first line, at now, and ends window later: the
// first Print of that length or Tick at or after its end prints its
// groups. now is whatever clock the owner groups by (wall time, or the
// lines' own times for a replay), the same for every call.
//
// The error is that of a write Print had to make, if any.
func (p *Printer) Print(l Line, window time.Duration, now time.Time) error {
	p.noteMesh(l.Mesh)
	if window <= 0 {
		return p.put(Group{Count: 1, First: l, Ranks: 1})
	}
	w := p.window(window)
	var err error
	if w.agg.Pending() > 0 && !now.Before(w.due) {
		err = p.printGroups(w)
	}
	if w.agg.Pending() == 0 {
		w.due = now.Add(window)
	}
	w.agg.Add(l)
	return err
}

// Tick prints the groups of every window that has ended by now and
// writes out every line kept. It returns the first write error.
func (p *Printer) Tick(now time.Time) error {
	var err error
	for _, w := range p.windows {
		if w.agg.Pending() > 0 && !now.Before(w.due) {
			err = cmp.Or(err, p.printGroups(w))
		}
	}
	return cmp.Or(err, p.writeOut())
}

// Flush prints the groups of every window, ended or not, and writes out
// every line kept: nothing printed stays behind. It returns the first
// write error.
func (p *Printer) Flush() error {
	var err error
	for _, w := range p.windows {
		err = cmp.Or(err, p.printGroups(w))
	}
	return cmp.Or(err, p.writeOut())
}

// noteMesh notes that a line of mesh came: the second mesh seen makes
// prefixes name theirs.
func (p *Printer) noteMesh(mesh string) {
	switch {
	case mesh == "" || p.manyMeshes:
	case p.firstMesh == "":
		p.firstMesh = mesh
	case mesh != p.firstMesh:
		p.manyMeshes = true
	}
}

// window returns the window of that length, making it on first use.
func (p *Printer) window(length time.Duration) *printWindow {
	for _, w := range p.windows {
		if w.length == length {
			return w
		}
	}
	w := &printWindow{length: length, agg: NewAggregator()}
	p.windows = append(p.windows, w)
	return w
}

// printGroups prints the groups of w's window and starts a new one.
func (p *Printer) printGroups(w *printWindow) error {
	var err error
	for _, g := range w.agg.Flush() {
		err = cmp.Or(err, p.put(g))
	}
	return err
}

// put adds g's line to buf, first writing out what buf holds when it is
// of the other stream or when both would not fit in one chunk.
func (p *Printer) put(g Group) error {
	var err error
	if g.First.Stream != p.stream {
		err = p.writeOut()
		p.stream = g.First.Stream
	}
	start := len(p.buf)
	p.buf = append(appendGroup(p.buf, g, p.color(p.stream), p.manyMeshes), '\n')
	if start > 0 && len(p.buf) > chunk {
		err = cmp.Or(err, p.write(p.buf[:start]))
		p.buf = append(p.buf[:0], p.buf[start:]...)
	}
	return err
}

// writeOut writes the lines in buf.
func (p *Printer) writeOut() error {
	if len(p.buf) == 0 {
		return nil
	}
	err := p.write(p.buf)
	p.buf = p.buf[:0]
	return err
}

func (p *Printer) write(b []byte) error {
	w := p.out
	if p.stream == Stderr {
		w = p.err
	}
	_, err := w.Write(b)
	return err
}

func (p *Printer) color(s Stream) bool {
	if s == Stderr {
		return p.colorErr
	}
	return p.colorOut
}
