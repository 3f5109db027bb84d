package ibverbs_test

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestVerbsBackendBuilds builds and tests the package with the verbs
// backend (-tags verbs, cgo over libibverbs), which testdata/verbs/setup.sh
// installs as root when missing: the backend must compile everywhere
// even where, as here, no RDMA device lets it run (its test then skips
// and says why).
func TestVerbsBackendBuilds(t *testing.T) {
	if strings.Contains(os.Getenv("GOFLAGS"), "verbs") {
		t.Skip("already built with -tags verbs")
	}
	if out, err := exec.Command("../testdata/verbs/setup.sh").CombinedOutput(); err != nil {
		if os.Getenv("MONARCH_REQUIRE_CLUSTER") == "1" {
			t.Fatalf("libibverbs-dev required (MONARCH_REQUIRE_CLUSTER=1): %v\n%s", err, out)
		}
		t.Skipf("libibverbs-dev cannot be installed here: %v\n%s", err, out)
	}
	if out, err := exec.Command("go", "vet", "-tags", "verbs", ".").CombinedOutput(); err != nil {
		t.Fatalf("go vet -tags verbs: %v\n%s", err, out)
	}
	out, err := exec.Command("go", "test", "-tags", "verbs", "-count=1", "-run", "^TestVerbs$", "-v", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go test -tags verbs: %v\n%s", err, out)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if strings.Contains(line, "verbs backend is not used here") || strings.Contains(line, "--- ") {
			t.Log(strings.TrimSpace(line))
		}
	}
}
