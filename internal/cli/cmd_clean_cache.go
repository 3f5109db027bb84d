package cli

import (
	"fmt"
	"io"
	"time"

	"github.com/monarch-go/monarch/internal/bincache"
	"github.com/urfave/cli/v2"
)

// cacheFlag names the cache of binaries monarch clean prunes: where
// launchers sent this host the programs and the monarch binary of their
// jobs ([ship] cache in their hosts files).
var cacheFlag = &cli.StringFlag{Name: "cache", Usage: "the cache of binaries sent to this host to prune: `DIR` ([ship] cache; default ~/.cache/monarch/bin, or $XDG_CACHE_HOME/monarch/bin)"}

// cleanCache prunes the cache of binaries dir (default: bincache's): it
// keeps what a running process executes and what a job used within age
// (bincache.DefaultKeep when 0), and says what it did.
func cleanCache(w io.Writer, dir string, age time.Duration, now time.Time) error {
	if dir == "" {
		d, err := bincache.DefaultDir()
		if err != nil {
			return fmt.Errorf("clean: the cache of binaries: %w", err)
		}
		dir = d
	}
	keep := age
	if keep == 0 {
		keep = bincache.DefaultKeep
	}
	p, err := bincache.Prune(dir, keep, now)
	if err != nil {
		return fmt.Errorf("clean: the cache of binaries %s: %w", dir, err)
	}
	if len(p.Removed) == 0 && p.InUse+p.Recent == 0 {
		return nil
	}
	_, err = fmt.Fprintf(w, "binaries sent to this host (%s): removed %d, %s; kept %d in use by a running process, %d used within %s\n",
		dir, len(p.Removed), sizeText(p.Bytes), p.InUse, p.Recent, ageWords(keep))
	return err
}

// ageWords writes an age as --older-than takes it: days when whole.
func ageWords(d time.Duration) string {
	if d%(24*time.Hour) == 0 {
		return fmt.Sprintf("%dd", d/(24*time.Hour))
	}
	return d.String()
}
