package logagg_test

import (
	"os"
	"testing"

	"github.com/monarch-go/monarch/internal/testenv"
)

func TestMain(m *testing.M) {
	env := testenv.Setup()
	os.Exit(env.Finish(m.Run()))
}
