package logagg_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/monarch-go/monarch/logagg"
)

// printLog records the writes of both of a Printer's writers, in order.
type printLog struct {
	writes []write
	fail   error // returned by every write when set
}

type write struct {
	to   string // "out" or "err"
	data string
}

type logWriter struct {
	log *printLog
	to  string
}

func (w logWriter) Write(b []byte) (int, error) {
	w.log.writes = append(w.log.writes, write{w.to, string(b)})
	if w.log.fail != nil {
		return 0, w.log.fail
	}
	return len(b), nil
}

func newTestPrinter() (*logagg.Printer, *printLog) {
	log := &printLog{}
	return logagg.NewPrinter(logWriter{log, "out"}, logWriter{log, "err"}), log
}

// text is what went to one writer.
func (l *printLog) text(to string) string {
	var b strings.Builder
	for _, w := range l.writes {
		if w.to == to {
			b.WriteString(w.data)
		}
	}
	return b.String()
}

var printT0 = time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)

// printStep is one call on a Printer: a Print of line with window at
// printT0+at, a Tick at printT0+at (tick), or a Flush (flush).
type printStep struct {
	at     time.Duration
	line   logagg.Line
	window time.Duration
	tick   bool
	flush  bool
	// what the writers hold after the step
	out, err string
}

func TestPrinter(t *testing.T) {
	tests := []struct {
		name  string
		steps []printStep
	}{
		{"raw: kept until a tick or a line of the other stream", []printStep{
			{line: out(0, "step 1 loss=0.5")},
			{line: out(1, "step 1 loss=0.6")},
			{line: errLine(1, "CUDA warning"), out: "[0] step 1 loss=0.5\n[1] step 1 loss=0.6\n"},
			{line: out(2, "step 1 loss=0.4"), out: "[0] step 1 loss=0.5\n[1] step 1 loss=0.6\n", err: "[1] CUDA warning\n"},
			{tick: true, out: "[0] step 1 loss=0.5\n[1] step 1 loss=0.6\n[2] step 1 loss=0.4\n", err: "[1] CUDA warning\n"},
		}},
		{"raw: flush writes out", []printStep{
			{line: out(0, "a")},
			{flush: true, out: "[0] a\n"},
		}},
		{"window: grouped until it ends", []printStep{
			{at: 0, window: 3 * time.Second, line: out(0, "step 1 loss=0.5")},
			{at: time.Second, window: 3 * time.Second, line: out(1, "step 1 loss=0.4")},
			{at: 2 * time.Second, window: 3 * time.Second, line: errLine(1, "step 1 loss=0.4")},
			{at: 2900 * time.Millisecond, window: 3 * time.Second, line: out(3, "step 2 loss=0.3")},
			{at: 2999 * time.Millisecond, tick: true},
			{at: 3 * time.Second, tick: true, out: "[3 similar log lines] [0] step 1 loss=0.5\n", err: "[1] step 1 loss=0.4\n"},
			{at: 10 * time.Second, tick: true, out: "[3 similar log lines] [0] step 1 loss=0.5\n", err: "[1] step 1 loss=0.4\n"},
		}},
		{"window: opens with its first line, a later line closes it", []printStep{
			{at: 5 * time.Second, window: time.Second, line: out(0, "tick 1")},
			{at: 5900 * time.Millisecond, window: time.Second, line: out(1, "tick 2")},
			{at: 6 * time.Second, window: time.Second, line: out(2, "tick 3")},
			{at: 6 * time.Second, tick: true, out: "[2 similar log lines] [0] tick 1\n"},
			{at: 7 * time.Second, tick: true, out: "[2 similar log lines] [0] tick 1\n[2] tick 3\n"},
		}},
		{"window: lines' own times, out of order", []printStep{
			{at: 0, window: 3 * time.Second, line: out(0, "step 0")},
			{at: 2 * time.Second, window: 3 * time.Second, line: out(1, "step 1")},
			{at: time.Second, window: 3 * time.Second, line: out(2, "step 2")},
			{at: 5 * time.Second, window: 3 * time.Second, line: out(0, "epoch 1")},
			{flush: true, out: "[3 similar log lines] [0] step 0\n[0] epoch 1\n"},
		}},
		{"windows of two lengths and raw lines", []printStep{
			{at: 0, window: time.Second, line: out(0, "fast 1")},
			{at: 0, window: 10 * time.Second, line: out(1, "slow 1")},
			{at: 0, line: out(2, "raw 1")},
			{at: 500 * time.Millisecond, window: time.Second, line: out(0, "fast 2")},
			{at: 500 * time.Millisecond, window: 10 * time.Second, line: out(1, "slow 2")},
			{at: time.Second, tick: true, out: "[2] raw 1\n[2 similar log lines] [0] fast 1\n"},
			{flush: true, out: "[2] raw 1\n[2 similar log lines] [0] fast 1\n[2 similar log lines] [1] slow 1\n"},
		}},
		{"flush closes windows not yet ended", []printStep{
			{at: 0, window: time.Hour, line: errLine(4, "retrying in 5s")},
			{at: time.Second, tick: true},
			{flush: true, err: "[4] retrying in 5s\n"},
			{flush: true, err: "[4] retrying in 5s\n"},
		}},
		{"zero and negative windows are raw", []printStep{
			{window: 0, line: out(0, "a")},
			{window: -time.Second, line: out(1, "b")},
			{tick: true, out: "[0] a\n[1] b\n"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, log := newTestPrinter()
			for i, s := range tt.steps {
				var err error
				switch {
				case s.flush:
					err = p.Flush()
				case s.tick:
					err = p.Tick(printT0.Add(s.at))
				default:
					err = p.Print(s.line, s.window, printT0.Add(s.at))
				}
				if err != nil {
					t.Fatalf("step %d: %v", i, err)
				}
				if got := log.text("out"); got != s.out {
					t.Fatalf("step %d: stdout %q, want %q", i, got, s.out)
				}
				if got := log.text("err"); got != s.err {
					t.Fatalf("step %d: stderr %q, want %q", i, got, s.err)
				}
			}
		})
	}
}

// Lines are written in the order they were printed across both writers,
// and each write holds whole lines of one stream.
func TestPrinterOrderAcrossStreams(t *testing.T) {
	p, log := newTestPrinter()
	p.Print(out(0, "a"), 0, printT0)
	p.Print(out(0, "b"), 0, printT0)
	p.Print(errLine(0, "c"), 0, printT0)
	p.Print(out(0, "d"), 0, printT0)
	p.Print(out(0, "e"), 0, printT0)
	p.Flush()
	want := []write{{"out", "[0] a\n[0] b\n"}, {"err", "[0] c\n"}, {"out", "[0] d\n[0] e\n"}}
	if fmt.Sprint(log.writes) != fmt.Sprint(want) {
		t.Errorf("writes %q, want %q", log.writes, want)
	}
}

// Every write is of whole lines and at most 4 KiB, unless one line alone
// is longer; nothing is lost or reordered.
func TestPrinterChunks(t *testing.T) {
	tests := []struct {
		name   string
		window time.Duration
		color  bool
		sizes  []int // text lengths
	}{
		{"short lines", 0, false, repeat(10, 3000)},
		{"lines filling chunks exactly", 0, false, repeat(4096-len("[7] \n"), 5)},
		{"lines one byte over", 0, false, repeat(4096-len("[7] \n")+1, 5)},
		{"mixed, up to the 4 KiB cut", 0, false, []int{1, 4096, 3000, 1200, 4096, 0, 17, 4000, 95, 4096}},
		{"colored", 0, true, []int{100, 4080, 2000, 2100, 4096, 5}},
		{"groups", time.Second, true, []int{100, 4080, 2000, 2100, 4096, 5}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, log := newTestPrinter()
			p.SetColor(tt.color, tt.color)
			var want strings.Builder
			for i, n := range tt.sizes {
				// A letter of its own and then x's: lines of a window are
				// groups of one, printed as lines.
				l := out(7, (string(rune('a'+i%26)) + strings.Repeat("x", max(n-1, 0)))[:n])
				p.Print(l, tt.window, printT0)
				want.WriteString(logagg.FormatLine(l, tt.color) + "\n")
			}
			p.Flush()
			var got strings.Builder
			for i, w := range log.writes {
				if !strings.HasSuffix(w.data, "\n") {
					t.Fatalf("write %d does not end a line: ...%q", i, w.data[max(len(w.data)-20, 0):])
				}
				if len(w.data) > 4096 && strings.Count(w.data, "\n") > 1 {
					t.Fatalf("write %d: %d bytes, %d lines", i, len(w.data), strings.Count(w.data, "\n"))
				}
				// A write is only cut short of 4 KiB when the next line
				// would not fit.
				if i+1 < len(log.writes) {
					next := log.writes[i+1].data
					first := next[:strings.IndexByte(next, '\n')+1]
					if len(w.data)+len(first) <= 4096 {
						t.Fatalf("write %d: %d bytes, yet the next line (%d bytes) would have fit", i, len(w.data), len(first))
					}
				}
				got.WriteString(w.data)
			}
			if got.String() != want.String() {
				t.Fatalf("written text differs from the lines printed")
			}
		})
	}
}

func repeat(n, times int) []int {
	s := make([]int, times)
	for i := range s {
		s[i] = n
	}
	return s
}

func TestPrinterColor(t *testing.T) {
	l, e := out(3, "step 100"), errLine(3, "CUDA error")
	group := []logagg.Line{out(3, "step 100"), out(4, "step 101")}
	tests := []struct {
		name               string
		colorOut, colorErr bool
		out, err           string
	}{
		{"off", false, false, "[3] step 100\n[2 similar log lines] [3] step 100\n", "[3] CUDA error\n"},
		{"stdout only", true, false,
			"\x1b[34m[3]\x1b[0m step 100\n\x1b[2m[2 similar log lines]\x1b[0m \x1b[34m[3]\x1b[0m step 100\n", "[3] CUDA error\n"},
		{"stderr only", false, true, "[3] step 100\n[2 similar log lines] [3] step 100\n", "\x1b[31m[3]\x1b[0m CUDA error\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, log := newTestPrinter()
			p.SetColor(tt.colorOut, tt.colorErr)
			p.Print(l, 0, printT0)
			p.Print(e, 0, printT0)
			for _, g := range group {
				p.Print(g, time.Second, printT0)
			}
			p.Flush()
			if got := log.text("out"); got != tt.out {
				t.Errorf("stdout %q, want %q", got, tt.out)
			}
			if got := log.text("err"); got != tt.err {
				t.Errorf("stderr %q, want %q", got, tt.err)
			}
		})
	}
	// Writers that are not files get no color, whatever the environment.
	t.Setenv("NO_COLOR", "")
	t.Setenv("TERM", "xterm-256color")
	p, log := newTestPrinter()
	p.Print(l, 0, printT0)
	p.Flush()
	if got := log.text("out"); got != "[3] step 100\n" {
		t.Errorf("a buffer got %q", got)
	}
}

// A failed write is reported by the call that made it; the lines it held
// are dropped, later lines are written.
func TestPrinterWriteError(t *testing.T) {
	p, log := newTestPrinter()
	broken := errors.New("broken pipe")
	log.fail = broken
	p.Print(out(0, "a"), 0, printT0)
	if err := p.Print(errLine(0, "b"), 0, printT0); !errors.Is(err, broken) {
		t.Fatalf("Print switching streams: %v, want %v", err, broken)
	}
	if err := p.Flush(); !errors.Is(err, broken) {
		t.Fatalf("Flush: %v, want %v", err, broken)
	}
	log.fail = nil
	p.Print(out(0, "c"), 0, printT0)
	if err := p.Tick(printT0); err != nil {
		t.Fatal(err)
	}
	want := []write{{"out", "[0] a\n"}, {"err", "[0] b\n"}, {"out", "[0] c\n"}}
	if fmt.Sprint(log.writes) != fmt.Sprint(want) {
		t.Errorf("writes %q, want %q", log.writes, want)
	}
}

func BenchmarkPrinter(b *testing.B) {
	lines := benchCorpus(4096)
	for _, window := range []time.Duration{0, time.Second} {
		b.Run(fmt.Sprintf("window=%v", window), func(b *testing.B) {
			p := logagg.NewPrinter(discard{}, discard{})
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				p.Print(lines[i%len(lines)], window, lines[i%len(lines)].Time)
				i++
			}
			p.Flush()
		})
	}
}

type discard struct{}

func (discard) Write(b []byte) (int, error) { return len(b), nil }
