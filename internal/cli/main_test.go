package cli

import (
	"os"
	"testing"

	"github.com/monarch-go/monarch/internal/testenv"
)

// The commands run in-process here write job records and logs: under a
// temporary HOME and state dir.
func TestMain(m *testing.M) {
	env := testenv.Setup()
	os.Exit(env.Finish(m.Run()))
}
