package hostsconfig

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSPMDNoticeSignal: [spmd] notice_signal is USR1 unless the file
// says otherwise (a bad value is in testdata/bad).
func TestSPMDNoticeSignal(t *testing.T) {
	for _, tt := range []struct{ line, want string }{
		{"", "USR1"},
		{`notice_signal = "USR2"`, "USR2"},
		{`notice_signal = "none"`, "none"},
	} {
		j := loadSPMD(t, tt.line)
		if j.SPMD.NoticeSignal != tt.want {
			t.Errorf("%q: notice signal %q, want %q", tt.line, j.SPMD.NoticeSignal, tt.want)
		}
	}
}

// TestSPMDMaxRestarts: [spmd] max_restarts is 0 unless the file says
// otherwise, and config check says what it does (bad values are in
// testdata/bad).
func TestSPMDMaxRestarts(t *testing.T) {
	for _, tt := range []struct {
		line string
		want int
		says string
	}{
		{"", 0, ""},
		{"max_restarts = 0", 0, ""},
		{"max_restarts = 1", 1, "; a rank's failure restarts every rank once (max_restarts = 1)"},
		{"max_restarts = 3", 3, "; a rank's failure restarts every rank, up to 3 times (max_restarts = 3)"},
	} {
		j := loadSPMD(t, tt.line)
		if j.SPMD.MaxRestarts != tt.want {
			t.Errorf("%q: max restarts %d, want %d", tt.line, j.SPMD.MaxRestarts, tt.want)
		}
		first, _, _ := strings.Cut(j.Describe(), "\n")
		if want := "spmd: runs true on every proc; CUDA_VISIBLE_DEVICES from dimension gpus" + tt.says; first != want {
			t.Errorf("%q: describes it as\n%s\nwant\n%s", tt.line, first, want)
		}
	}
}

// loadSPMD loads an [spmd] job of the command true with one more line.
func loadSPMD(t *testing.T, line string) *Job {
	t.Helper()
	path := filepath.Join(t.TempDir(), "job.toml")
	if err := os.WriteFile(path, []byte("[spmd]\ncommand = [\"true\"]\n"+line+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	j, err := LoadJob(path)
	if err != nil {
		t.Fatalf("%q: %v", line, err)
	}
	return j
}

// TestSPMDNNodes: [spmd] nnodes is torchrun's --nnodes: "MIN:MAX", or a
// number N (an integer or a string), which is N:N; unset, 0:0 (every
// host); config check says what it does (bad values are in testdata/bad).
func TestSPMDNNodes(t *testing.T) {
	for _, tt := range []struct {
		line     string
		min, max int
		says     string
	}{
		{"", 0, 0, ""},
		{`nnodes = "1:2"`, 1, 2, `; on 2 hosts, going on with those left when some are lost, down to 1 (nnodes = "1:2")`},
		{`nnodes = "2"`, 2, 2, "; on 2 hosts (nnodes = 2)"},
		{`nnodes = 3`, 3, 3, "; on 3 hosts (nnodes = 3)"},
		{`nnodes = "2:2"`, 2, 2, "; on 2 hosts (nnodes = 2)"},
	} {
		j := loadSPMD(t, tt.line)
		if j.SPMD.MinHosts != tt.min || j.SPMD.MaxHosts != tt.max {
			t.Errorf("%q: nnodes %d:%d, want %d:%d", tt.line, j.SPMD.MinHosts, j.SPMD.MaxHosts, tt.min, tt.max)
		}
		first, _, _ := strings.Cut(j.Describe(), "\n")
		if want := "spmd: runs true on every proc; CUDA_VISIBLE_DEVICES from dimension gpus" + tt.says; first != want {
			t.Errorf("%q: describes it as\n%s\nwant\n%s", tt.line, first, want)
		}
	}
}

// TestParseNNodes: what --nnodes takes and refuses, as torchrun does.
func TestParseNNodes(t *testing.T) {
	for s, want := range map[string][2]int{"1:4": {1, 4}, "2": {2, 2}, "3:3": {3, 3}} {
		if min, max, err := ParseNNodes(s); err != nil || min != want[0] || max != want[1] {
			t.Errorf("ParseNNodes(%q) = %d, %d, %v; want %v", s, min, max, err, want)
		}
	}
	for s, want := range map[string]string{
		"":      `want MIN:MAX hosts, such as "1:4", or a number of hosts, got ""`,
		"1:":    `want MIN:MAX hosts, such as "1:4", or a number of hosts, got "1:"`,
		":2":    `want MIN:MAX hosts, such as "1:4", or a number of hosts, got ":2"`,
		"1:2:3": `want MIN:MAX hosts, such as "1:4", or a number of hosts, got "1:2:3"`,
		"+1:2":  `want MIN:MAX hosts, such as "1:4", or a number of hosts, got "+1:2"`,
		"0:2":   `want at least 1 host, got "0:2"`,
		"-1":    `want at least 1 host, got "-1"`,
		"3:2":   `want MIN no more than MAX, got "3:2"`,
	} {
		if _, _, err := ParseNNodes(s); err == nil || err.Error() != want {
			t.Errorf("ParseNNodes(%q): %v, want %s", s, err, want)
		}
	}
}
