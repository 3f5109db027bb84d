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
