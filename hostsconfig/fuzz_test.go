package hostsconfig

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/BurntSushi/toml"
	"github.com/monarch-go/monarch/internal/testenv/alloc"
)

// FuzzDecode: on any input every loader returns, without panicking,
// within maxDecodeAlloc, and with a *ConfigError when the file is bad;
// and on valid TOML the limits count no fewer keys and levels than the
// library parses. Its seeds are testdata/fuzz/FuzzDecode, which
// TestFuzzSeeds keeps.
func FuzzDecode(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) <= MaxFileSize && checkLimits(string(data)) == nil {
			var v map[string]any
			if md, err := toml.Decode(string(data), &v); err == nil {
				keys := md.Keys()
				if len(keys) > maxKeys {
					t.Errorf("within the limits, yet the library parses %d keys", len(keys))
				}
				for _, k := range keys {
					if len(k) > maxDepth {
						t.Errorf("within the limits, yet the library parses key %s, %d deep", k, len(k))
					}
				}
			}
		}

		path := filepath.Join(t.TempDir(), "fuzz.toml")
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		for name, load := range loaders {
			var err error
			if n := alloc.By(func() { err = load(path) }); n > maxDecodeAlloc {
				t.Errorf("%s allocated %d MiB, want at most %d", name, n>>20, maxDecodeAlloc>>20)
			}
			var ce *ConfigError
			if err != nil && !errors.As(err, &ce) {
				t.Errorf("%s: error is a %T, not a *ConfigError: %v", name, err, err)
			}
		}
	})
}

// seeds are the seed inputs of FuzzDecode by name: every file of
// testdata/good and testdata/bad, the repository's examples, and the
// pathological shapes.
func seeds(t *testing.T) map[string][]byte {
	out := map[string][]byte{}
	for prefix, pattern := range map[string]string{
		"good-":    "testdata/good/*.toml",
		"bad-":     "testdata/bad/*.toml",
		"example-": "../testdata/*.toml",
	} {
		files, err := filepath.Glob(pattern)
		if err != nil || len(files) == 0 {
			t.Fatalf("no %s: %v", pattern, err)
		}
		for _, file := range files {
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			out[prefix+strings.TrimSuffix(filepath.Base(file), ".toml")] = data
		}
	}
	for _, p := range pathological {
		out["shape-"+p.name] = []byte(p.src)
	}
	return out
}

// TestFuzzSeeds checks that testdata/fuzz/FuzzDecode holds every seed as
// it is now; -update writes them. Other files there are inputs fuzzing
// found, kept as tests.
func TestFuzzSeeds(t *testing.T) {
	dir := filepath.Join("testdata", "fuzz", "FuzzDecode")
	for name, data := range seeds(t) {
		want := []byte(fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", data))
		path := filepath.Join(dir, name)
		if *update {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, want, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := os.ReadFile(path)
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s is missing or out of date (run go test -run TestFuzzSeeds -update): %v", path, err)
		}
	}
}
