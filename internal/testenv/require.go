package testenv

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"testing"
)

// setups holds each setup script's outcome, by the path Require got.
var setups sync.Map // string: *setupRun

type setupRun struct {
	once sync.Once
	skip string // why it cannot be installed here
	fail string // why its install failed
}

// Require makes sure what some tests need is here: script is a
// testdata/<tool>/setup.sh that installs it when missing (Debian's
// package, as root), exit status 0 when it is there, 3 when it cannot be
// installed here (not root, no apt-get), anything else when the install
// failed. The script runs once per test binary. Where what cannot be
// installed, tb skips saying why, or fails under MONARCH_REQUIRE_CLUSTER=1
// (as CI runs); a failed install fails tb.
func Require(tb testing.TB, what, script string) {
	tb.Helper()
	v, _ := setups.LoadOrStore(script, &setupRun{})
	s := v.(*setupRun)
	s.once.Do(func() {
		out, err := exec.Command(script).CombinedOutput()
		var ee *exec.ExitError
		switch {
		case err == nil:
		case errors.As(err, &ee) && ee.ExitCode() == 3:
			s.skip = fmt.Sprintf("%s: %v\n%s", script, err, out)
		default:
			s.fail = fmt.Sprintf("%s: %v\n%s", script, err, out)
		}
	})
	switch {
	case s.fail != "":
		tb.Fatal(s.fail)
	case s.skip != "" && os.Getenv("MONARCH_REQUIRE_CLUSTER") == "1":
		tb.Fatalf("%s required (MONARCH_REQUIRE_CLUSTER=1): %s", what, s.skip)
	case s.skip != "":
		tb.Skipf("%s cannot be installed here: %s", what, s.skip)
	}
}
