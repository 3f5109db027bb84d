package launch

import (
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/monarch-go/monarch/internal/jobenv"
	"github.com/monarch-go/monarch/logagg"
)

// published keeps what a clientOutput publishes.
type published struct {
	mu    sync.Mutex
	lines []logagg.Line
}

func (p *published) Publish(subject string, data []byte) error {
	l, err := logagg.ParseLine(data)
	if err != nil {
		return err
	}
	p.mu.Lock()
	p.lines = append(p.lines, l)
	p.mu.Unlock()
	return nil
}

// TestClientOutput: the client's output goes on as written, every line
// is published as the client's (long ones in pieces), and the end line
// is published but not passed on, even when it comes in pieces.
func TestClientOutput(t *testing.T) {
	f, err := os.CreateTemp(t.TempDir(), "terminal")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	pub := &published{}
	o := newClientOutput(f, logagg.Stderr, pub, "j1")
	long := strings.Repeat("x", logagg.MaxLine+10)
	end := jobenv.OutputEnd + "\n"
	for _, w := range []string{"hel", "lo\nwor", "ld\r\n", "\n", long + "\n", "\x00not the end\n", end[:5], end[5:], "prompt> "} {
		o.Write([]byte(w))
	}
	term, err := os.ReadFile(f.Name())
	if err != nil {
		t.Fatal(err)
	}
	if want := "hello\nworld\r\n\n" + long + "\n\x00not the end\nprompt> "; string(term) != want {
		t.Errorf("passed on %q, want %q", term, want)
	}
	var texts []string
	for _, l := range pub.lines {
		if l.Proc != logagg.ClientProc || l.Stream != logagg.Stderr || l.Host == "" {
			t.Errorf("published %+v: want a stderr line of the client with this host", l)
		}
		texts = append(texts, l.Text)
	}
	want := []string{"hello", "world", "", long[:logagg.MaxLine], long[logagg.MaxLine:], "\x00not the end", jobenv.OutputEnd}
	if strings.Join(texts, "|") != strings.Join(want, "|") {
		t.Errorf("published %q, want %q", texts, want)
	}
}
