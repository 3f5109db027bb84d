package launch

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestStepLog: srun's own lines are held (not passed on), the agents'
// pass as they come; both are kept, bounded, in order.
func TestStepLog(t *testing.T) {
	var pass strings.Builder
	s := &stepLog{own: srunOwn, pass: &pass}
	fmt.Fprint(s, "srun: forcing job termination\nmonarch agent on h1: bo")
	fmt.Fprint(s, "om\r\n\nslurmstepd-h1: error: *** STEP 2.0 ON h1 CANCELLED AT x ***\nno newline")
	s.flush()
	if got, want := pass.String(), "monarch agent on h1: boom\nno newline\n"; got != want {
		t.Errorf("passed on %q, want %q", got, want)
	}
	kept, dropped := s.said()
	var own []bool
	var text []string
	for _, l := range kept {
		own, text = append(own, l.own), append(text, l.text)
	}
	if fmt.Sprint(own) != "[true false true false]" || dropped != 0 || text[1] != "monarch agent on h1: boom" {
		t.Errorf("kept %q (own %v), dropped %d", text, own, dropped)
	}
}

// TestStepLogBounded: a process that writes without end keeps its first
// and last lines, and a line without end is cut.
func TestStepLogBounded(t *testing.T) {
	s := &stepLog{own: srunOwn}
	for i := range 10000 {
		fmt.Fprintf(s, "srun: line %d\n", i)
	}
	s.Write([]byte(strings.Repeat("x", 10*maxLineLen)))
	s.flush()
	kept, dropped := s.said()
	if len(kept) != 2*stepLogKeep || dropped != 10000+10-2*stepLogKeep {
		t.Fatalf("kept %d, dropped %d", len(kept), dropped)
	}
	if kept[0].text != "srun: line 0" || kept[stepLogKeep-1].text != fmt.Sprintf("srun: line %d", stepLogKeep-1) {
		t.Errorf("head: %q ... %q", kept[0].text, kept[stepLogKeep-1].text)
	}
	last := kept[len(kept)-1].text
	if len(last) != maxLineLen || kept[len(kept)-11].text != "srun: line 9999" {
		t.Errorf("tail: %q, then %d bytes", kept[len(kept)-11].text, len(last))
	}
}

func TestKeyLine(t *testing.T) {
	dir := t.TempDir()
	write := func(name, s string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	hosts := write("hosts.toml", "scheduler = \"slurm\"\n# nodes = 9\n[ssh]\nnodes = 1\n[slurm]\npartition = \"debug\"\n  nodes=3\n")
	if n := keyLine(hosts, "slurm", "nodes"); n != 7 {
		t.Errorf("nodes at line %d, want 7", n)
	}
	if n := keyLine(hosts, "slurm", "immediate"); n != 0 {
		t.Errorf("immediate at line %d, want 0 (not given)", n)
	}
	inline := write("job.toml", "program = \"x\"\n[hosts]\nscheduler = \"slurm\"\nslurm.nodes = 2\n")
	if n := keyLine(inline, "slurm", "nodes"); n != 4 {
		t.Errorf("dotted nodes at line %d, want 4", n)
	}
	table := write("job2.toml", "[hosts.slurm]\nnodes = 2\n")
	if n := keyLine(table, "slurm", "nodes"); n != 2 {
		t.Errorf("[hosts.slurm] nodes at line %d, want 2", n)
	}
	if n := keyLine(filepath.Join(dir, "none.toml"), "slurm", "nodes"); n != 0 {
		t.Errorf("a missing file: line %d", n)
	}
}
