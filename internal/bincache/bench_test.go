package bincache

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// medianMs times f (after one run not counted) 5 times and returns the
// median, in milliseconds.
func medianMs(b *testing.B, f func()) float64 {
	b.Helper()
	f()
	var ms []float64
	for range 5 {
		t0 := time.Now()
		f()
		ms = append(ms, float64(time.Since(t0).Microseconds())/1e3)
	}
	slices.Sort(ms)
	return ms[2]
}

// randomFile writes size random bytes at path, mode 0500, and returns
// their sha256.
func randomFile(b *testing.B, path string, size int) string {
	b.Helper()
	data := make([]byte, size)
	rand.Read(data)
	if err := os.WriteFile(path, data, 0o500); err != nil {
		b.Fatal(err)
	}
	s := sha256.Sum256(data)
	return hex.EncodeToString(s[:])
}

// BenchmarkOpenProgram: what a host agent spends on its program before
// its first proc, OpenProgram (the rule on the file and its folders, open,
// sha256 of the descriptor) of a 32 MiB program, beside the floor of the
// same run: reading the file and hashing its bytes, nothing checked. Then
// a cached copy with its stamp (not read), beside the floor of opening it
// with the rule checked and nothing else. Milliseconds, medians of 5.
func BenchmarkOpenProgram(b *testing.B) {
	const size = 32 << 20
	path := filepath.Join(b.TempDir(), "prog")
	sum := randomFile(b, path, size)
	open := func(path, sum string) func() {
		return func() {
			p, err := OpenProgram(path, sum)
			if err != nil {
				b.Fatal(err)
			}
			p.Close()
		}
	}
	o := medianMs(b, open(path, sum))
	f := medianMs(b, func() {
		d, err := os.ReadFile(path)
		if err != nil {
			b.Fatal(err)
		}
		if got := sha256.Sum256(d); hex.EncodeToString(got[:]) != sum {
			b.Fatal("sum differs")
		}
	})
	fmt.Printf("BENCH agent-program-open-32MiB-ms ours=%.1f floor=%.1f ratio=%.3f target<=1.5\n", o, f, o/f)

	cache := filepath.Join(b.TempDir(), "cache")
	bin := Binary{Path: path, Name: "prog", Sum: sum, Size: size}
	argv := CheckArgv(cache, ModeAuto, []Binary{bin}, []string{path})
	if out, err := exec.Command(argv[0], argv[1:]...).Output(); err != nil {
		b.Fatalf("check: %v: %s", err, out)
	}
	e := Entry(cache, bin)
	if _, err := os.Stat(StampPath(e)); err != nil {
		b.Fatalf("not stamped: %v", err)
	}
	o, f = medianMs(b, open(e, sum)), medianMs(b, open(e, ""))
	fmt.Printf("BENCH agent-program-open-stamped-32MiB-ms ours=%.2f floor=%.2f ratio=%.3f target<=3\n", o, f, o/f)
}

// BenchmarkCheckWarm: the hosts' check of a warm cache, two stamped
// copies of 32 MiB (a monarch binary and a program), beside the floor of
// the same run: a check of no binary (the shell, its tools and the rule
// on the cache folder: what any check costs; each stamped copy adds
// three tools started: stat for the rule on it and its folders, stat for
// it and its stamp, touch); and beside the same check when the copies
// have no stamp and are hashed, as each use did before stamps.
// Milliseconds, medians of 5.
func BenchmarkCheckWarm(b *testing.B) {
	const size = 32 << 20
	src, cache := b.TempDir(), filepath.Join(b.TempDir(), "cache")
	var bins []Binary
	for _, name := range []string{"monarch", "prog"} {
		p := filepath.Join(src, name)
		bins = append(bins, Binary{Path: p, Name: name, Sum: randomFile(b, p, size), Size: size})
	}
	paths := []string{bins[0].Path, bins[1].Path}
	check := func(bins []Binary, paths []string, want string) func() {
		return func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			argv := CheckArgv(cache, ModeAlways, bins, paths)
			out, err := exec.CommandContext(ctx, argv[0], argv[1:]...).Output()
			if err != nil {
				b.Fatalf("check: %v", err)
			}
			var rs []Reply
			for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
				if r, ok := Parse(l); ok {
					rs = append(rs, r)
				}
			}
			if got := words(rs); got != want {
				b.Fatalf("check: %s, want %s", got, want)
			}
		}
	}
	argv := CheckArgv(cache, ModeAuto, bins, paths)
	if out, err := exec.Command(argv[0], argv[1:]...).Output(); err != nil {
		b.Fatalf("check: %v: %s", err, out)
	}
	o := medianMs(b, check(bins, paths, "dir have have"))
	f := medianMs(b, check(nil, nil, "dir"))
	fmt.Printf("BENCH ship-check-warm-2x32MiB-ms ours=%.1f floor=%.1f ratio=%.3f target<=3\n", o, f, o/f)
	hashed := medianMs(b, func() {
		for _, bin := range bins {
			os.Remove(StampPath(Entry(cache, bin)))
		}
		check(bins, paths, "dir have have")()
	})
	fmt.Printf("BENCH ship-check-warm-2x32MiB-vs-hashed-ms ours=%.1f floor=%.1f ratio=%.3f target<=0.25\n", o, hashed, o/hashed)
}
