package logagg

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/iotest"
	"time"
)

func TestCapture(t *testing.T) {
	long := strings.Repeat("x", MaxLine+100)
	tests := []struct {
		name string
		in   string
		want []string
	}{
		{"lines", "a\nb\n", []string{"a", "b"}},
		{"no final newline", "a\nb", []string{"a", "b"}},
		{"empty lines kept", "a\n\nb\n", []string{"a", "", "b"}},
		{"crlf", "a\r\nb\r\n", []string{"a", "b"}},
		{"long line cut and marked", long + "\nnext\n", []string{strings.Repeat("x", MaxLine) + " …[cut: 100 more bytes]", "next"}},
		{"exactly max", strings.Repeat("y", MaxLine) + "\n", []string{strings.Repeat("y", MaxLine)}},
		{"very long line", strings.Repeat("z", 10*MaxLine) + "\n", []string{strings.Repeat("z", MaxLine) + " …[cut: 36864 more bytes]"}},
		{"nothing", "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			// One byte at a time: lines must not depend on read sizes.
			err := Capture(iotest.OneByteReader(strings.NewReader(tt.in)), func(s string) { got = append(got, s) })
			if err != nil {
				t.Fatal(err)
			}
			if strings.Join(got, "|") != strings.Join(tt.want, "|") || len(got) != len(tt.want) {
				t.Fatalf("got %d lines %q, want %d %q", len(got), trim(got), len(tt.want), trim(tt.want))
			}
		})
	}
}

func trim(s []string) []string {
	out := make([]string, len(s))
	for i, x := range s {
		if len(x) > 40 {
			x = x[:20] + "..." + x[len(x)-20:]
		}
		out[i] = x
	}
	return out
}

func TestCaptureReadError(t *testing.T) {
	boom := errors.New("boom")
	var got []string
	err := Capture(io.MultiReader(strings.NewReader("a\nhalf"), iotest.ErrReader(boom)), func(s string) { got = append(got, s) })
	if !errors.Is(err, boom) || strings.Join(got, "|") != "a|half" {
		t.Fatalf("err %v, lines %q", err, got)
	}
}

func TestLineWire(t *testing.T) {
	for _, l := range []Line{
		{Time: time.Unix(1700000000, 123456789), Host: "h1", Proc: "c-3", Rank: 7, Stream: Stderr, Text: "loss=0.5 ünïcode"},
		{Time: time.Unix(0, 0), Stream: Stdout},
		{Time: time.Unix(5, 0), Host: "", Proc: "x", Rank: 1 << 20, Stream: Stdout, Text: strings.Repeat("a", MaxLine)},
	} {
		got, err := ParseLine(AppendLine(nil, l))
		if err != nil {
			t.Fatal(err)
		}
		if !got.Time.Equal(l.Time) || got.Host != l.Host || got.Proc != l.Proc || got.Rank != l.Rank || got.Stream != l.Stream || got.Text != l.Text {
			t.Fatalf("round trip: %+v, want %+v", got, l)
		}
	}
	for _, bad := range [][]byte{nil, {1}, {9, 1, 0, 0, 0, 0}, {1, 1, 0, 0, 5, 'a'}} {
		if _, err := ParseLine(bad); err == nil {
			t.Errorf("ParseLine(%v) succeeded", bad)
		}
	}
}

func TestParseLevel(t *testing.T) {
	for _, ok := range []string{"TRACE", "debug", " Info ", "WARN", "error"} {
		if _, err := ParseLevel(ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, bad := range []string{"", "LOUD", "WARNING", "3"} {
		_, err := ParseLevel(bad)
		if err == nil || !strings.Contains(err.Error(), "TRACE, DEBUG, INFO, WARN, ERROR") {
			t.Errorf("%q: %v", bad, err)
		}
	}
}

func TestSystemLogger(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	t.Setenv(EnvSystemLogDir, "") // the default: $TMPDIR/$USER
	t.Setenv("USER", "tester")
	t.Setenv(EnvFileLevel, "DEBUG")
	t.Setenv(EnvStderrLevel, "ERROR")
	l, c, err := SystemLogger("job1", "client")
	if err != nil {
		t.Fatal(err)
	}
	l.Debug().Msg("to the file only")
	l.Trace().Msg("to nowhere")
	c.Close()
	path := filepath.Join(tmp, "tester", "monarch_job1_client.log")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "to the file only") || strings.Contains(string(b), "to nowhere") {
		t.Fatalf("log file:\n%s", b)
	}
	for p, want := range map[string]os.FileMode{path: 0o600, filepath.Dir(path): 0o700} {
		if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != want {
			t.Errorf("%s: mode %v, want %v (%v)", p, fi.Mode().Perm(), want, err)
		}
	}
	t.Setenv(EnvStderrLevel, "LOUD")
	if _, _, err := SystemLogger("job1", "client"); err == nil || !strings.Contains(err.Error(), "MONARCH_STDERR_LOG") || !strings.Contains(err.Error(), "valid levels are TRACE") {
		t.Fatalf("bad level: %v", err)
	}
}
