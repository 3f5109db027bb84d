package actorrt

import (
	"os/exec"
	"testing"
)

// TestAdverbsGenerated fails when adverbs_gen.go is not what
// internal/genadverbs writes: edit the generator, then go generate ./actorrt.
func TestAdverbsGenerated(t *testing.T) {
	out, err := exec.Command("go", "run", "./internal/genadverbs", "-check").CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
}
