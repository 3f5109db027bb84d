package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/google/pprof/profile"
	"github.com/monarch-go/monarch/actorrt"
	"github.com/monarch-go/monarch/hostsconfig"
	"github.com/monarch-go/monarch/internal/jobctl"
	"github.com/urfave/cli/v2"
)

// monarch profile asks a running job's client, over the job's control
// socket (internal/jobctl), for CPU (or heap) profiles of its procs, taken
// at once, and merges them into one profile that go tool pprof reads,
// each sample labelled with its proc.
func profileCommand() *cli.Command {
	return &cli.Command{
		Name:      "profile",
		Usage:     "profile a running job's procs at once into one pprof file (the newest running job's without JOB)",
		ArgsUsage: "[JOB]",
		Description: "Asks the job's client, through its control socket on this host, for a CPU profile of --seconds\n" +
			"of every selected proc, all taken at once (with --heap, a heap profile of each, taken at once\n" +
			"after a GC), and merges them into FILE, which go tool pprof reads. CPU samples taken in an\n" +
			"actor's call carry the labels mesh, endpoint and rank of the actor (go tool pprof -tags, or\n" +
			"-tagfocus endpoint=Step); every sample carries proc, host, procmesh and procrank, so that one\n" +
			"proc can be picked (-tagfocus proc=h1.c-4). Without --mesh, --rank or --host the client is\n" +
			"profiled too. Procs that give no profile (command procs, procs that ended or did not answer\n" +
			"within --timeout after the profile) are listed on stderr; FILE is written if one proc gave one.",
		Flags: append(selectionFlags(),
			&cli.IntFlag{Name: "seconds", Value: 30, Usage: "how long the CPU profiles run, in `SECONDS` (1 to 300)"},
			&cli.BoolFlag{Name: "heap", Usage: "take heap profiles instead of CPU profiles (at once)"},
			&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Usage: "the `FILE` the merged profile goes to (required)"},
			&cli.DurationFlag{Name: "timeout", Value: actorrt.DefaultStacksTimeout, Usage: "how long to wait for the procs' answers after the profile"},
		),
		Action: func(c *cli.Context) error {
			out := c.String("output")
			if out == "" {
				return usagef(c, "-o FILE is required: where the merged profile goes")
			}
			if fi, err := os.Stat(filepath.Dir(out)); err != nil || !fi.IsDir() {
				return fmt.Errorf("profile: -o %s: no dir %s to write it in", out, filepath.Dir(out))
			}
			req := jobctl.ProfileRequest{Selection: selection(c), Heap: c.Bool("heap"), Timeout: c.Duration("timeout")}
			if s := c.Int("seconds"); req.Heap && c.IsSet("seconds") {
				return fmt.Errorf("profile: --seconds %d with --heap: a heap profile is taken at once", s)
			} else if !req.Heap {
				if s < 1 || s > int(jobctl.MaxProfile/time.Second) {
					return fmt.Errorf("profile: --seconds %d: want 1 to %d", s, int(jobctl.MaxProfile/time.Second))
				}
				req.Duration = time.Duration(s) * time.Second
			}
			if req.Timeout <= 0 {
				return fmt.Errorf("profile: --timeout %v: want a positive duration such as 5s", req.Timeout)
			}
			dir := hostsconfig.StateDir()
			j, err := runningJob(c.Context, "profile", dir, c.Args().First())
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(c.Context, req.Duration+req.Timeout+15*time.Second)
			defer cancel()
			var ans jobctl.ProfileAnswer
			path := jobctl.SocketPath(dir, j.Job)
			if err := jobctl.Call(ctx, path, jobctl.OpProfile, req, &ans); err != nil {
				return controlError(c.Context, "profile", dir, j, path, err)
			}
			merged, n, err := mergeProfiles(&ans)
			missing := make([]*jobctl.ProcInfo, len(ans.Procs))
			for i := range ans.Procs {
				missing[i] = &ans.Procs[i].ProcInfo
			}
			jobctl.FormatMissing(c.App.ErrWriter, "procs without a profile", missing)
			if err != nil {
				return fmt.Errorf("profile: job %s: %w", j.Job, err)
			}
			if n == 0 {
				return fmt.Errorf("profile: job %s: no proc gave a profile; %s not written", j.Job, out)
			}
			if err := writeProfile(out, merged); err != nil {
				return fmt.Errorf("profile: %w", err)
			}
			kind := fmt.Sprintf("CPU profile of %v", req.Duration)
			if req.Heap {
				kind = "heap profile"
			}
			fmt.Fprintf(c.App.Writer, "job %s: %s of %d of %d procs in %s (go tool pprof %[5]s)\n", j.Job, kind, n, len(ans.Procs), out)
			return nil
		},
	}
}

// mergeProfiles merges the profiles of a into one, each sample labelled
// with its proc: proc (its id), host, procmesh and procrank ("client" and
// -1 for the client). It returns how many procs gave one; a profile that
// does not parse makes its proc's Missing say so.
func mergeProfiles(a *jobctl.ProfileAnswer) (*profile.Profile, int, error) {
	var profs []*profile.Profile
	for i := range a.Procs {
		p := &a.Procs[i]
		if p.Missing != "" || len(p.Profile) == 0 {
			if p.Missing == "" {
				p.Missing = "an empty profile"
			}
			continue
		}
		prof, err := profile.ParseData(p.Profile)
		if err != nil {
			p.Missing = "its profile does not parse: " + err.Error()
			continue
		}
		mesh := p.Mesh
		if p.Rank < 0 {
			mesh = "client"
		}
		for _, s := range prof.Sample {
			if s.Label == nil {
				s.Label = map[string][]string{}
			}
			s.Label["proc"] = []string{p.Proc}
			s.Label["host"] = []string{p.Host}
			s.Label["procmesh"] = []string{mesh}
			s.Label["procrank"] = []string{strconv.Itoa(p.Rank)}
		}
		profs = append(profs, prof)
	}
	if len(profs) == 0 {
		return nil, 0, nil
	}
	merged, err := profile.Merge(profs)
	if err != nil {
		return nil, 0, fmt.Errorf("merge: %w", err)
	}
	// Merge adds the durations up; the profiles ran at once.
	merged.DurationNanos = 0
	for _, p := range profs {
		merged.DurationNanos = max(merged.DurationNanos, p.DurationNanos)
	}
	merged.Comments = append(merged.Comments, fmt.Sprintf("monarch profile of job %s: %d procs", a.Job, len(profs)))
	return merged, len(profs), nil
}

// writeProfile writes p to path: to a temporary file beside it first, so
// that path is never a partial profile.
func writeProfile(path string, p *profile.Profile) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	err = p.Write(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		os.Remove(f.Name())
	}
	return err
}
