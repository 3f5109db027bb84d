package logagg_test

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/monarch-go/monarch/logagg"
)

// The mesh of a line: on the wire, in the job's log, in prefixes and
// filters; and the client's lines.

// appendLineV1 is a line as version 1 put it on the wire (no mesh): what
// an agent of an older monarch sends.
func appendLineV1(l logagg.Line) []byte {
	b := []byte{1, byte(l.Stream)}
	b = binary.AppendUvarint(b, uint64(l.Rank))
	b = binary.AppendUvarint(b, uint64(l.Time.UnixNano()))
	b = binary.AppendUvarint(b, uint64(len(l.Host)))
	b = append(b, l.Host...)
	b = binary.AppendUvarint(b, uint64(len(l.Proc)))
	b = append(b, l.Proc...)
	return append(b, l.Text...)
}

func TestWireMesh(t *testing.T) {
	l := logagg.Line{Time: time.Unix(0, 1234567890), Host: "h1", Proc: "c-3", Mesh: "trainer", Rank: 5, Stream: logagg.Stderr, Text: "loss 0.1"}
	got, err := logagg.ParseLine(logagg.AppendLine(nil, l))
	if err != nil || got != l {
		t.Errorf("round trip: %+v, %v; want %+v", got, err, l)
	}
	old := l
	old.Mesh = ""
	got, err = logagg.ParseLine(appendLineV1(old))
	if err != nil || got != old {
		t.Errorf("version 1: %+v, %v; want %+v", got, err, old)
	}
	if _, err := logagg.ParseLine([]byte{3, 1, 0, 0, 0, 0}); err == nil {
		t.Error("version 3 parsed")
	}
}

// FuzzParseLine: any bytes parse or fail without a panic, and a line
// that parses is sent again as the same line.
func FuzzParseLine(f *testing.F) {
	l := logagg.Line{Time: time.Unix(0, 99), Host: "node3", Proc: "h3-1", Mesh: "gen", Rank: 25, Stream: logagg.Stdout, Text: "step 100"}
	f.Add(logagg.AppendLine(nil, l))
	f.Add(appendLineV1(l))
	f.Add([]byte{2, 1, 0, 0, 200, 1})
	f.Add([]byte{2})
	f.Fuzz(func(t *testing.T, b []byte) {
		l, err := logagg.ParseLine(b)
		if err != nil || l.Rank < 0 || l.Time.UnixNano() < 0 {
			return
		}
		again, err := logagg.ParseLine(logagg.AppendLine(nil, l))
		if err != nil || again != l {
			t.Fatalf("%q: parsed %+v, sent again %+v, %v", b, l, again, err)
		}
	})
}

func TestStoreMesh(t *testing.T) {
	dir := t.TempDir()
	t0 := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	lines := []logagg.Line{
		{Time: t0, Host: "h0", Proc: "c-1", Mesh: "trainer", Rank: 0, Stream: logagg.Stdout, Text: "a"},
		{Time: t0, Host: "h0", Proc: "c-2", Mesh: "gen", Rank: 0, Stream: logagg.Stdout, Text: "b"},
		{Time: t0, Host: "h0", Proc: logagg.ClientProc, Rank: 0, Stream: logagg.Stderr, Text: "c"},
	}
	writeLog(t, dir, "j1", 0, lines)
	if got := readAll(t, dir, "j1", logagg.Filter{}); len(got) != 3 || got[0].Mesh != "trainer" || got[1].Mesh != "gen" || got[2].Mesh != "" {
		t.Errorf("read back: %+v", got)
	}
	if got := readAll(t, dir, "j1", logagg.Filter{Meshes: []string{"gen"}}); len(got) != 1 || got[0].Text != "b" {
		t.Errorf("--mesh gen: %+v", got)
	}
	// The client's lines are no rank's.
	if got := readAll(t, dir, "j1", logagg.Filter{Ranks: []int{0}}); len(got) != 2 {
		t.Errorf("--rank 0: %+v", got)
	}
	// A log written before meshes had names: no "m", no mesh.
	old := `{"t":"2026-12-02T10:00:00Z","h":"h0","p":"c-1","r":0,"s":"stdout","x":"old"}` + "\n"
	if err := os.WriteFile(filepath.Join(dir, "j2.log"), []byte(old), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, dir, "j2", logagg.Filter{}); len(got) != 1 || got[0].Mesh != "" || got[0].Text != "old" {
		t.Errorf("old log: %+v", got)
	}
	raw, err := os.ReadFile(filepath.Join(dir, "j1.log"))
	if err != nil || !bytes.Contains(raw, []byte(`"m":"trainer"`)) || bytes.Count(raw, []byte(`"m":`)) != 2 {
		t.Errorf("log file: want \"m\" on the lines of a mesh only:\n%s", raw)
	}
}

// TestPrinterMeshPrefix: prefixes name the mesh once a second mesh has
// printed; the client's lines are [client].
func TestPrinterMeshPrefix(t *testing.T) {
	p, log := newTestPrinter()
	now := time.Now()
	line := func(mesh string, rank int, text string) logagg.Line {
		return logagg.Line{Mesh: mesh, Rank: rank, Stream: logagg.Stdout, Text: text, Proc: "p"}
	}
	p.Print(line("trainer", 0, "one mesh"), 0, now)
	p.Print(logagg.Line{Proc: logagg.ClientProc, Stream: logagg.Stdout, Text: "mine"}, 0, now)
	p.Print(line("gen", 0, "two meshes"), 0, now)
	p.Print(line("trainer", 1, "named"), 0, now)
	p.Flush()
	var out strings.Builder
	for _, w := range log.writes {
		out.WriteString(w.data)
	}
	want := "[0] one mesh\n[client] mine\n[gen 0] two meshes\n[trainer 1] named\n"
	if out.String() != want {
		t.Errorf("printed:\n%s\nwant:\n%s", out.String(), want)
	}
}
