package bincache

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// BenchmarkOpenProgram: what a host agent spends on its program before
// its first proc, OpenProgram (the rule on the file and its folders, open,
// sha256 of the descriptor) of a 32 MiB program, beside the floor of the
// same run: reading the file and hashing its bytes, nothing checked.
// Milliseconds, medians of 5.
func BenchmarkOpenProgram(b *testing.B) {
	const size = 32 << 20
	data := make([]byte, size)
	rand.Read(data)
	path := filepath.Join(b.TempDir(), "prog")
	if err := os.WriteFile(path, data, 0o500); err != nil {
		b.Fatal(err)
	}
	s := sha256.Sum256(data)
	sum := hex.EncodeToString(s[:])
	ours := func() float64 {
		t0 := time.Now()
		p, err := OpenProgram(path, sum)
		if err != nil {
			b.Fatal(err)
		}
		p.Close()
		return float64(time.Since(t0).Microseconds()) / 1e3
	}
	floor := func() float64 {
		t0 := time.Now()
		d, err := os.ReadFile(path)
		if err != nil {
			b.Fatal(err)
		}
		if got := sha256.Sum256(d); hex.EncodeToString(got[:]) != sum {
			b.Fatal("sum differs")
		}
		return float64(time.Since(t0).Microseconds()) / 1e3
	}
	ours()
	floor()
	var o, f []float64
	for range 5 {
		o, f = append(o, ours()), append(f, floor())
	}
	slices.Sort(o)
	slices.Sort(f)
	fmt.Printf("BENCH agent-program-open-32MiB-ms ours=%.1f floor=%.1f ratio=%.3f target<=1.5\n", o[2], f[2], o[2]/f[2])
}
