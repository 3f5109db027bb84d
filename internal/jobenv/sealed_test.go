package jobenv

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"slices"
	"strings"
	"testing"
)

// A sealed [env] opens with its job's token only, to the variables sealed,
// values with any byte but NUL included; no value shows in the sealed
// text, nor in an error.
func TestSealEnv(t *testing.T) {
	env := []string{"HF_TOKEN=hf_s3cret", "EMPTY=", "ODD=a=b c\n'\"$x\\", "UNICODE=été"}
	sealed, err := SealEnv("tok", env)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(sealed, "s3cret") || strings.ContainsAny(sealed, " \n=") {
		t.Errorf("sealed text %q shows a value, or is no single word", sealed)
	}
	got, err := OpenEnv("tok", sealed)
	if err != nil || !slices.Equal(got, env) {
		t.Fatalf("OpenEnv = %q, %v; want %q", got, err, env)
	}
	again, _ := SealEnv("tok", env)
	if again == sealed {
		t.Error("two seals of the same [env] are alike: the nonce is not fresh")
	}
	if got, err := OpenEnv("tok", ""); got != nil || err != nil {
		t.Errorf("OpenEnv of nothing: %q, %v", got, err)
	}
	b, _ := base64.RawURLEncoding.DecodeString(sealed)
	b[len(b)-1] ^= 1
	tampered := base64.RawURLEncoding.EncodeToString(b)
	oversized := strings.Repeat("A", MaxSealedEnv+1)
	for what, tc := range map[string]struct{ token, sealed, want string }{
		"another job's token": {"other", sealed, "does not open with this job's token"},
		"tampered":            {"tok", tampered, "does not open with this job's token"},
		"not base64":          {"tok", "a b", "not base64"},
		"too short":           {"tok", "AAAA", "too short"},
		"oversized":           {"tok", oversized, "over the bound"},
		"no token":            {"", sealed, "no token"},
	} {
		got, err := OpenEnv(tc.token, tc.sealed)
		if err == nil || !strings.Contains(err.Error(), tc.want) || got != nil || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("%s: %q, %v; want an error saying %q", what, got, err, tc.want)
		}
	}
	if _, err := SealEnv("tok", []string{"A=1", "K=a\x00b"}); err == nil || !strings.Contains(err.Error(), "variable 1 of the job's [env] holds a NUL byte") {
		t.Errorf("a NUL: %v", err)
	}
	if got, err := OpenEnv("tok", mustSeal(t, nil)); got != nil || err != nil {
		t.Errorf("an empty [env]: %q, %v", got, err)
	}
	for what, env := range map[string][]string{"no key": {"=v"}, "no '='": {"KEY"}} {
		sealed, err := SealEnv("tok", env)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := OpenEnv("tok", sealed); err == nil || !strings.Contains(err.Error(), "variable 0 of the sealed [env] is not KEY=VALUE") {
			t.Errorf("%s: %v", what, err)
		}
	}
	if _, err := SealEnv("tok", []string{"BIG=" + strings.Repeat("x", MaxSealedEnv)}); err == nil || !strings.Contains(err.Error(), "put large values in files") {
		t.Errorf("an [env] too big to travel: %v", err)
	}
}

func mustSeal(t *testing.T, env []string) string {
	t.Helper()
	s, err := SealEnv("tok", env)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// An agent's stdin: the token's line, then the sealed [env]'s, then what
// the session sends later (nothing: its EOF ends the agent).
func TestSecretsOnStdin(t *testing.T) {
	sealed, _ := SealEnv("tok", []string{"A=1"})
	var b bytes.Buffer
	if err := WriteSecrets(&b, "tok", sealed); err != nil {
		t.Fatal(err)
	}
	b.WriteString("rest")
	r := bufio.NewReaderSize(&b, 16) // lines longer than the buffer
	tok, got, err := ReadSecrets(r)
	if err != nil || tok != "tok" || got != sealed {
		t.Fatalf("ReadSecrets = %q, %q, %v", tok, got, err)
	}
	if rest, _ := r.ReadString(0); rest != "rest" {
		t.Errorf("left %q on stdin", rest)
	}
	for what, tc := range map[string]struct{ in, want string }{
		"no token":       {"", "read the job secret from stdin: stdin ended after 0 bytes"},
		"no [env] line":  {"tok\n", "read the procs' sealed variables from stdin: stdin ended"},
		"cut short":      {"tok\nAAAA", "stdin ended after 4 bytes"},
		"a long token":   {strings.Repeat("t", maxTokenLine+1) + "\n\n", "more than 1024 bytes"},
		"a long [env]":   {"tok\n" + strings.Repeat("A", MaxSealedEnv+1) + "\n", "a line of more than"},
		"no end of line": {"tok\n" + strings.Repeat("A", 3*MaxSealedEnv), "a line of more than"},
	} {
		if _, _, err := ReadSecrets(bufio.NewReader(strings.NewReader(tc.in))); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", what, err, tc.want)
		}
	}
}

// FuzzOpenEnv: any text, with any token, opens to valid variables or to
// an error, never a panic; what SealEnv seals opens to itself.
func FuzzOpenEnv(f *testing.F) {
	sealed, _ := SealEnv("tok", []string{"A=1", "HF_TOKEN=x"})
	bad, _ := SealEnv("tok", []string{"NOKEY"})
	f.Add("tok", sealed, "A=1")
	f.Add("tok", bad, "=")
	f.Add("other", sealed, "K=v=w")
	f.Add("tok", "", "")
	f.Add("tok", "!!", "K=\x00")
	f.Add("tok", strings.Repeat("A", 40), "K=")
	f.Fuzz(func(t *testing.T, token, text, kv string) {
		if env, err := OpenEnv(token, text); err == nil {
			for _, kv := range env {
				if k, _, ok := strings.Cut(kv, "="); !ok || k == "" {
					t.Fatalf("OpenEnv gave %q", kv)
				}
			}
		}
		if token == "" {
			return
		}
		s, err := SealEnv(token, []string{kv, "B=" + text})
		if hasNUL := strings.IndexByte(kv+text, 0) >= 0; hasNUL != (err != nil) && len(kv)+len(text) < MaxSealedEnv/2 {
			t.Fatalf("SealEnv(%q, %q): %v", kv, text, err)
		}
		if err != nil {
			return // a NUL, or too big to travel
		}
		env, err := OpenEnv(token, s)
		k, _, ok := strings.Cut(kv, "=")
		if valid := ok && k != ""; valid != (err == nil) || valid && !slices.Equal(env, []string{kv, "B=" + text}) {
			t.Fatalf("sealed %q, opened %q, %v", []string{kv, "B=" + text}, env, err)
		}
	})
}

// FuzzReadSecrets: any stdin gives the two lines or an error, each line
// within its bound.
func FuzzReadSecrets(f *testing.F) {
	f.Add([]byte("tok\nsealed\nrest"))
	f.Add([]byte("tok\n"))
	f.Add([]byte(""))
	f.Add([]byte("\r\n\r\n"))
	f.Add(bytes.Repeat([]byte("x"), 2*maxTokenLine))
	f.Fuzz(func(t *testing.T, in []byte) {
		tok, sealed, err := ReadSecrets(bufio.NewReader(bytes.NewReader(in)))
		if err == nil && (len(tok) > maxTokenLine || len(sealed) > MaxSealedEnv || strings.Contains(tok, "\n")) {
			t.Fatalf("ReadSecrets(%q) = %q, %q", in, tok, sealed)
		}
	})
}
