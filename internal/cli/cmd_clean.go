package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/monarch-go/monarch/internal/jobctl"
	"github.com/monarch-go/monarch/internal/jobstate"
	"github.com/monarch-go/monarch/launch"
	"github.com/monarch-go/monarch/logagg"
	"github.com/urfave/cli/v2"
)

// monarch clean removes what the job store keeps of ended jobs: each one's
// record, its log (and rotated log), its detached launcher's output and
// its system logs on this host.
// Jobs that may still run are never touched. Without --older-than every
// ended job goes; logs without a record (left by older versions) go when
// they are complete or their writer is gone. Then it prunes this host's
// cache of binaries sent by launchers (cmd_clean_cache.go).
func cleanCommand() *cli.Command {
	return &cli.Command{
		Name:  "clean",
		Usage: "remove the records and logs of ended jobs (all of them, or those older than --older-than)",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "older-than", Usage: "only jobs that ended at least `AGE` ago: 7d, 12h, 30m (default: every ended job); and cached binaries unused that long, else 7d"},
			cacheFlag,
		},
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return fmt.Errorf("clean: unexpected argument %q (usage: monarch clean [--older-than AGE])", c.Args().First())
			}
			age, err := parseAge(c.String("older-than"))
			if err != nil {
				return err
			}
			now := time.Now()
			if err := runClean(c.Context, c.App.Writer, launch.DefaultStateDir(), logagg.SystemLogDir(), age, now); err != nil {
				return err
			}
			return cleanCache(c.App.Writer, c.String(cacheFlag.Name), age, now)
		},
	}
}

// parseAge reads --older-than: a Go duration, or a number of days (7d).
func parseAge(s string) (time.Duration, error) {
	if s == "" {
		return 0, nil
	}
	if days, ok := strings.CutSuffix(s, "d"); ok {
		if n, err := strconv.ParseFloat(days, 64); err == nil && n >= 0 && n < 1e5 {
			return time.Duration(n * float64(24*time.Hour)), nil
		}
	} else if d, err := time.ParseDuration(s); err == nil && d >= 0 {
		return d, nil
	}
	return 0, fmt.Errorf("clean: --older-than %q: want an age such as 7d, 12h or 30m", s)
}

func runClean(ctx context.Context, w io.Writer, dir, sysDir string, age time.Duration, now time.Time) error {
	recs, err := launch.Status(ctx, dir)
	if err != nil {
		return err
	}
	sysLogs, err := logagg.SystemLogsOf(sysDir)
	if err != nil {
		return fmt.Errorf("clean: %w", err)
	}
	files := func(job string) []string { return jobFiles(dir, job, recs, sysLogs[job]) }
	removed, err := jobstate.Clean(recs, dir, age, now, files)
	report := func(job, state string, n int, bytes int64) {
		fmt.Fprintf(w, "removed %s (%s): %d files, %s\n", job, state, n, sizeText(bytes))
	}
	var total int64
	for _, r := range removed {
		report(r.Job, stateText(r.Record), r.Files, r.Bytes)
		total += r.Bytes
	}
	if err != nil {
		return err
	}
	n := len(removed)
	orphans, err := cleanOrphans(dir, recs, age, now, files, func(job string, files int, bytes int64) {
		report(job, "log only", files, bytes)
		total += bytes
	})
	n += orphans
	if n == 0 {
		fmt.Fprintf(w, "nothing to clean in %s: no ended jobs%s\n", dir, ageText(age))
	} else {
		fmt.Fprintf(w, "freed %s (%d jobs)\n", sizeText(total), n)
	}
	return err
}

// jobFiles are the files of job beside its record: its log, its
// launcher's output when it ran detached (ID.out in dir; slurm-N.out,
// as earlier versions named it), and its system logs sys. An output the
// user placed elsewhere (--output) is theirs to remove.
func jobFiles(dir, job string, recs []*launch.JobState, sys []string) []string {
	// The control socket of a job whose client was killed is left behind.
	files := append(logagg.LogFiles(dir, job), launch.OutputPath(dir, job), jobctl.SocketPath(dir, job))
	for _, r := range recs {
		if r.Job == job && r.Batch != "" && r.BatchID != "" {
			files = append(files, filepath.Join(dir, r.Batch+"-"+r.BatchID+".out"))
		}
	}
	return append(files, sys...)
}

// cleanOrphans removes the logs that have no record, once complete.
func cleanOrphans(dir string, recs []*launch.JobState, age time.Duration, now time.Time, files func(string) []string,
	report func(string, int, int64)) (int, error) {
	jobs, err := logagg.Jobs(dir)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, job := range jobs {
		if slices.ContainsFunc(recs, func(r *launch.JobState) bool { return r.Job == job }) {
			continue
		}
		fi, err := os.Stat(logagg.LogFiles(dir, job)[0])
		if errors.Is(err, os.ErrNotExist) || err == nil && now.Sub(fi.ModTime()) < age {
			continue
		}
		if ended, err := logagg.Ended(dir, job); err != nil || !ended {
			continue
		}
		count, bytes, err := jobstate.RemoveFiles(files(job))
		if err != nil {
			return n, err
		}
		report(job, count, bytes)
		n++
	}
	return n, nil
}

func ageText(age time.Duration) string {
	if age == 0 {
		return ""
	}
	return " older than " + age.String()
}
