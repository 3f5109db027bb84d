package logagg_test

import (
	"strings"
	"testing"

	"github.com/monarch-go/monarch/logagg"
)

func TestTemplateGrouping(t *testing.T) {
	long := strings.Repeat("word ", 800) // 4000 bytes
	tests := []struct {
		name string
		a, b string
		same bool
	}{
		{"numbers", "step 1 loss=0.5", "step 2 loss=0.25", true},
		{"different word", "epoch 3 done", "epoch 3 failed", false},
		{"different key", "step 1 loss=0.5", "step 1 acc=0.5", false},
		{"extra token", "rank 3 ok", "rank 3 ok again", false},
		{"dash id", "worker-12 ready", "worker-7 ready", true},
		{"glued digits", "step100 done", "step7 done", true},
		{"signs and exponents", "lr=1e-4 delta=+3", "lr=-3.5E+10 delta=-0.25", true},
		{"leading dot", "ratio .5", "ratio 12.", true},
		{"percent", "done 45%", "done 100.0%", true},
		{"durations", "took 12ms", "took 3.5s", true},
		{"compound durations", "took 1h30m", "took 250µs", true},
		{"sizes", "size 2.5GiB", "size 512MB", true},
		{"number vs word", "took 12ms", "took long", false},
		{"0x hex", "alloc at 0x1f", "alloc at 0xDEADbeef00", true},
		{"long hex", "commit 3fa9c2d1e8 built", "commit 9b1c0e7f44aa built", true},
		{"hex that is all digits", "run-3fa9c2d1 saved", "run-12345678 saved", true},
		{"short hex in brackets", "NCCL 5[1b000] -> 6[2937]", "NCCL 0[5f] -> 1[a0000]", true},
		{"hex letters only are words", "state deadbeef", "state cafebabe", false},
		{"uuid", "request 123e4567-e89b-12d3-a456-426614174000 ok", "request 9f1c2b3a-0000-4abc-8def-0123456789ab ok", true},
		{"uuid vs word", "request 123e4567-e89b-12d3-a456-426614174000 ok", "request none ok", false},
		{"ipv4 with port", "connected to 10.0.0.1:29500", "connected to 192.168.1.20:8080", true},
		{"ipv4 and prefix", "route via 10.0.0.1", "route via 172.16.3.4/16", true},
		{"iso timestamps", "2026-12-02T10:00:00Z start", "2027-01-15T23:59:59.123456+01:00 start", true},
		{"date", "on 2026-12-02 run", "on 2027/01/15 run", true},
		{"time of day", "10:00:00.123 tick", "9:05:01 tick", true},
		{"glog prefix", "I1202 10:14:00.021705 4242 loader.py:212] hi", "I1203 11:00:59.000001 77 loader.py:212] hi", true},
		{"glog file differs", "I1202 10:14:00.021705 4242 loader.py:212] hi", "I1202 10:14:00.021705 4242 model.py:212] hi", false},
		{"separators and spaces", "a=1,b=2 (x)", "a = 3 , b = 4 ( x )", true},
		{"colon after word", "error: disk full", "error : disk full", true},
		{"versions", "torch v2.9.1", "torch v10.0.12", true},
		{"whitespace runs", "  a \t 1  ", "a 2", true},
		{"empty", "", "   ", true},
		{"empty vs text", "", "x", false},
		{"unicode", "损失 = 0.5 ✓", "损失 = 0.25 ✓", true},
		{"unicode words differ", "损失 = 0.5 ✓", "精度 = 0.5 ✓", false},
		{"accents", "temps écoulé: 3s", "temps écoulé: 12ms", true},
		{"4 KiB lines", long + "42", long + "4300", true},
		{"4 KiB lines differ", long + "done 42", long + "fail 42", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ta, tb := logagg.Template(tt.a), logagg.Template(tt.b)
			if (ta == tb) != tt.same {
				t.Errorf("%q → %q\n%q → %q\nsame = %v, want %v", tt.a, ta, tt.b, tb, ta == tb, tt.same)
			}
		})
	}
}

// The exact keys, for a few lines: what the masks look like.
func TestTemplateKeys(t *testing.T) {
	tests := []struct{ in, want string }{
		{"step 100 loss=0.42 (12ms) on worker-7", "step <N> loss = <N> ( <N> ) on worker-<N>"},
		{"[3] shard /data/shard-00042.tar", "[ <N> ] shard /data/shard-<N>.tar"},
		{"id 123e4567-e89b-12d3-a456-426614174000 from 10.0.0.1:80", "id <U> from <IP>"},
		{"at 2026-12-02T10:00:00Z and 10:00", "at <T> and <T>"},
		{"ptr 0x7ffe commit a1b2c3d4e5", "ptr <N> commit <N>"},
		{"", ""},
	}
	for _, tt := range tests {
		if got := logagg.Template(tt.in); got != tt.want {
			t.Errorf("Template(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// Lines built to hit the slow paths of each check stay linear: a 4 KiB
// line of them takes about as long as any other 4 KiB line.
func TestTemplatePathological(t *testing.T) {
	lines := []string{
		strings.Repeat("1:", 2048),
		strings.Repeat("1.", 2048),
		strings.Repeat("1e", 2048),
		strings.Repeat("1h", 2048),
		strings.Repeat("0x", 2048),
		strings.Repeat("9", 4096),
		strings.Repeat("a1-", 1365),
		strings.Repeat("2026-12-02T", 372),
		strings.Repeat("\xff1", 2048),
		strings.Repeat("=", 4096),
	}
	for _, l := range lines {
		if got := logagg.Template(l); strings.ContainsAny(got, "0123456789") {
			t.Errorf("template of %.20q... keeps digits: %.60q", l, got)
		}
	}
}

func BenchmarkTemplate4KiB(b *testing.B) {
	line := strings.Repeat("step 100 loss=0.42 worker-7 0x1f 10:00:00 ", 100)[:4096]
	b.SetBytes(int64(len(line)))
	for b.Loop() {
		logagg.Template(line)
	}
}

// FuzzTemplate: no input panics, and no decimal digit survives in a key
// (every token with one is masked, whole or in part).
func FuzzTemplate(f *testing.F) {
	for _, s := range []string{"step 1 loss=0.5", "10.0.0.1:80", "2026-12-02T10:00:00+01:00", "0x", "1e", "-", ":1:", "\xff9", "µs 3µs"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got := logagg.Template(s); strings.ContainsAny(got, "0123456789") {
			t.Errorf("Template(%q) = %q keeps a digit", s, got)
		}
	})
}
