package actortest_test

import (
	"os"
	"testing"

	"github.com/monarch-go/monarch/internal/testenv"
)

// The tests' state, logs and job records go to a temporary dir; nothing
// of a cluster is a process of its own, so none is left.
func TestMain(m *testing.M) {
	env := testenv.Setup()
	os.Exit(env.Finish(m.Run()))
}
