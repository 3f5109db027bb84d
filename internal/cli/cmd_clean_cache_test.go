package cli

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/monarch-go/monarch/internal/bincache"
)

// TestCleanCache: monarch clean prunes the cache of binaries sent to this
// host: an entry unused for longer than the age goes, one used lately
// stays, and --older-than sets the age.
func TestCleanCache(t *testing.T) {
	cache, src := t.TempDir(), t.TempDir()
	entry := func(content string, used time.Time) string {
		p := filepath.Join(src, "prog")
		if err := os.WriteFile(p, []byte(content), 0o755); err != nil {
			t.Fatal(err)
		}
		b, err := bincache.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		e := bincache.Entry(cache, b)
		if err := os.MkdirAll(filepath.Dir(e), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(e, []byte(content), 0o500); err != nil {
			t.Fatal(err)
		}
		os.Chtimes(filepath.Dir(e), used, used)
		return e
	}
	old := entry("used a month ago", time.Now().Add(-30*24*time.Hour))
	lately := entry("used two days ago", time.Now().Add(-48*time.Hour))

	out, stderr, code := runCLI(t, "clean", "--cache", cache)
	want := regexp.MustCompile(`(?m)^binaries sent to this host \(` + regexp.QuoteMeta(cache) + `\): removed 1, 16 B; kept 0 in use by a running process, 1 used within 7d$`)
	if code != 0 || !want.MatchString(out) {
		t.Fatalf("exit %d:\n%s%s", code, out, stderr)
	}
	if _, err := os.Stat(old); err == nil {
		t.Error("the entry unused for a month is still there")
	}
	if _, err := os.Stat(lately); err != nil {
		t.Errorf("the entry used lately is gone: %v", err)
	}
	out, _, code = runCLI(t, "clean", "--cache", cache, "--older-than", "1d")
	if code != 0 || !strings.Contains(out, "removed 1, 17 B; kept 0 in use by a running process, 0 used within 1d") {
		t.Fatalf("--older-than 1d: exit %d:\n%s", code, out)
	}
	if out, _, _ := runCLI(t, "clean", "--cache", cache); strings.Contains(out, "binaries sent") {
		t.Errorf("an empty cache reported:\n%s", out)
	}
}
