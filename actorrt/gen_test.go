package actorrt

import (
	"os/exec"
	"testing"
)

// TestAdverbsGenerated fails when adverbs_gen.go is not what
// gen_adverbs.go writes: edit the generator, then go generate ./actorrt.
func TestAdverbsGenerated(t *testing.T) {
	out, err := exec.Command("go", "run", "gen_adverbs.go", "-check").CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
}
