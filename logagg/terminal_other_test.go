//go:build !linux

package logagg_test

import (
	"os"
	"testing"
)

// openTerminal has no pseudo-terminal to give outside Linux.
func openTerminal(t *testing.T) *os.File { return nil }
