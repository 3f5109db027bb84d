package hostsconfig

import (
	"os"
	"path/filepath"
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
		path := filepath.Join(t.TempDir(), "job.toml")
		if err := os.WriteFile(path, []byte("[spmd]\ncommand = [\"true\"]\n"+tt.line+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		j, err := LoadJob(path)
		if err != nil {
			t.Fatalf("%q: %v", tt.line, err)
		}
		if j.SPMD.NoticeSignal != tt.want {
			t.Errorf("%q: notice signal %q, want %q", tt.line, j.SPMD.NoticeSignal, tt.want)
		}
	}
}
