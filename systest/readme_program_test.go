package systest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// readmeProgram is the file README.md's program (under "## A program")
// must be, word for word: the program that this test runs.
const readmeProgram = "examples/counters/main.go"

// TestReadmeProgram: README.md's first program is examples/counters,
// whitespace aside, and that program prints what the comment on its
// fmt.Println line says it prints.
func TestReadmeProgram(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	block, err := readmeBlock(string(readme), "## A program")
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile(readmeProgram)
	if err != nil {
		t.Fatal(err)
	}
	if d := lineDiff(normalizeLines(block), normalizeLines(string(src))); d != "" {
		t.Fatalf("README.md's program differs from %s (- README, + file); make them the same:\n%s", readmeProgram, d)
	}

	const marker = "fmt.Println(values) // "
	i := strings.Index(string(src), marker)
	if i < 0 {
		t.Fatalf("%s has no line %q: the output it promises", readmeProgram, marker+"...")
	}
	want, _, _ := strings.Cut(string(src)[i+len(marker):], "\n")

	bin := filepath.Join(t.TempDir(), "counters")
	if out, err := exec.Command("go", "build", "-o", bin, "./"+filepath.Dir(readmeProgram)).CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var stdout, stderr strings.Builder
	cmd := exec.CommandContext(ctx, bin)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s: %v\nstdout:\n%s\nstderr:\n%s", readmeProgram, err, stdout.String(), stderr.String())
	}
	if got := strings.TrimSpace(stdout.String()); got != want {
		t.Fatalf("%s printed %q, its comment (and the README) says %q\nstderr:\n%s", readmeProgram, got, want, stderr.String())
	}
}

// readmeBlock returns the first ```go block after the line heading.
func readmeBlock(readme, heading string) (string, error) {
	_, rest, ok := strings.Cut(readme, "\n"+heading+"\n")
	if !ok {
		return "", fmt.Errorf("README.md has no heading %q", heading)
	}
	_, rest, ok = strings.Cut(rest, "```go\n")
	if !ok {
		return "", fmt.Errorf("README.md has no ```go block after %q", heading)
	}
	block, _, ok := strings.Cut(rest, "\n```")
	if !ok {
		return "", fmt.Errorf("README.md's ```go block after %q does not end", heading)
	}
	return block, nil
}

// normalizeLines splits s into lines, each with its runs of spaces and
// tabs made one space, and without the blank lines at either end.
func normalizeLines(s string) []string {
	var lines []string
	for _, l := range strings.Split(s, "\n") {
		lines = append(lines, strings.Join(strings.Fields(l), " "))
	}
	for len(lines) > 0 && lines[0] == "" {
		lines = lines[1:]
	}
	for len(lines) > 0 && lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	return lines
}

// lineDiff is a diff of a and b, line by line ("" if they are equal):
// the longest common subsequence kept, "-" for a's other lines, "+" for
// b's, each change with two lines of context.
func lineDiff(a, b []string) string {
	// lcs[i][j] is the length of the longest common subsequence of a[i:]
	// and b[j:].
	lcs := make([][]int, len(a)+1)
	for i := range lcs {
		lcs[i] = make([]int, len(b)+1)
	}
	for i := len(a) - 1; i >= 0; i-- {
		for j := len(b) - 1; j >= 0; j-- {
			if a[i] == b[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	var lines []string // each "  ", "- " or "+ " and a line
	var changes []int  // indexes in lines of the changed ones
	for i, j := 0, 0; i < len(a) || j < len(b); {
		switch {
		case i < len(a) && j < len(b) && a[i] == b[j]:
			lines = append(lines, "  "+a[i])
			i, j = i+1, j+1
		case i < len(a) && (j == len(b) || lcs[i+1][j] >= lcs[i][j+1]):
			changes = append(changes, len(lines))
			lines = append(lines, "- "+a[i])
			i++
		default:
			changes = append(changes, len(lines))
			lines = append(lines, "+ "+b[j])
			j++
		}
	}
	const context = 2
	var out strings.Builder
	next := 0 // the first line not yet written
	for _, c := range changes {
		from := max(c-context, next)
		if from > next && next > 0 {
			out.WriteString("...\n")
		}
		for k := from; k <= min(c+context, len(lines)-1); k++ {
			out.WriteString(lines[k] + "\n")
		}
		next = max(next, min(c+context, len(lines)-1)+1)
	}
	return out.String()
}
