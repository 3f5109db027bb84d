package launch

import (
	"bytes"
	"strings"
	"sync"
)

// tailWriter keeps the last lines written to it: what an agent's process
// said last, for the message that reports its end.
type tailWriter struct {
	mu    sync.Mutex
	max   int
	lines []string
	part  []byte
}

func (t *tailWriter) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.part = append(t.part, p...)
	for {
		i := bytes.IndexByte(t.part, '\n')
		if i < 0 {
			break
		}
		if line := strings.TrimSpace(string(t.part[:i])); line != "" {
			t.lines = append(t.lines, line)
			if len(t.lines) > t.max {
				t.lines = t.lines[1:]
			}
		}
		t.part = t.part[i+1:]
	}
	if len(t.part) > 4096 {
		t.part = t.part[len(t.part)-4096:]
	}
	return len(p), nil
}

func (t *tailWriter) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	lines := t.lines[:len(t.lines):len(t.lines)] // appending must not write into t.lines
	if s := strings.TrimSpace(string(t.part)); s != "" {
		lines = append(lines, s)
	}
	return strings.Join(lines, " | ")
}
