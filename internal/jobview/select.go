package jobview

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/monarch-go/monarch/internal/jobctl"
)

// proc is a proc the control socket may ask about; the client's own has
// id "".
type proc struct {
	id      string
	host    string
	mesh    string
	rank    int
	command bool
}

// procsOf lists the procs of the proc meshes the client started, in
// order of their start and rank.
func procsOf(l Live) []proc {
	var out []proc
	for _, pm := range l.ProcMeshes {
		for r, p := range pm.Procs {
			host := ""
			if l.HostOf != nil {
				host = l.HostOf(p.ID)
			}
			if host == "" {
				host = p.Host
			}
			out = append(out, proc{id: p.ID, host: host, mesh: pm.Name, rank: r, command: pm.Command})
		}
	}
	return out
}

// selectProcs picks the procs req asks for; a mesh, rank or host that
// no proc has is an error naming it and what there is.
func selectProcs(all []proc, req jobctl.Selection) ([]proc, error) {
	meshes, hosts := map[string]int{}, map[string]bool{}
	var meshOrder, hostOrder []string
	for _, p := range all {
		if _, ok := meshes[p.mesh]; !ok {
			meshOrder = append(meshOrder, p.mesh)
		}
		meshes[p.mesh] = max(meshes[p.mesh], p.rank+1)
		if !hosts[p.host] {
			hostOrder = append(hostOrder, p.host)
		}
		hosts[p.host] = true
	}
	has := func(what string, names []string) string {
		if len(names) == 0 {
			return "the job has no procs"
		}
		return "the job's " + what + ": " + strings.Join(names, ", ")
	}
	for _, m := range req.Meshes {
		if _, ok := meshes[m]; !ok {
			return nil, fmt.Errorf("no proc mesh %q; %s", m, has("proc meshes", meshOrder))
		}
	}
	for _, h := range req.Hosts {
		if !hosts[h] {
			return nil, fmt.Errorf("no proc of the job on host %q; %s", h, has("hosts", hostOrder))
		}
	}
	inScope := meshOrder
	if len(req.Meshes) > 0 {
		inScope = req.Meshes
	}
	for _, r := range req.Ranks {
		found := false
		var sizes []string
		for _, m := range inScope {
			found = found || r >= 0 && r < meshes[m]
			sizes = append(sizes, fmt.Sprintf("%s has ranks 0-%d", meshName(m), meshes[m]-1))
		}
		if !found {
			if len(sizes) == 0 {
				return nil, fmt.Errorf("no rank %d: the job has no procs", r)
			}
			return nil, fmt.Errorf("no rank %d: %s", r, strings.Join(sizes, ", "))
		}
	}
	var out []proc
	for _, p := range all {
		if (len(req.Meshes) == 0 || slices.Contains(req.Meshes, p.mesh)) &&
			(len(req.Ranks) == 0 || slices.Contains(req.Ranks, p.rank)) &&
			(len(req.Hosts) == 0 || slices.Contains(req.Hosts, p.host)) {
			out = append(out, p)
		}
	}
	return out, nil
}

func meshName(m string) string {
	if m == "" {
		return "the unnamed mesh"
	}
	return "mesh " + m
}

// askEach runs ask for each of procs (the client's too: its id is "") at
// once, but the command procs, which have no runtime of ours to give a
// Go what, and waits for them, at most wait: it sets the Missing of
// infos[i] to why proc i gave nothing (late, when it did not answer
// within wait).
func askEach(ctx context.Context, procs []proc, infos []jobctl.ProcInfo, wait time.Duration, what, late string,
	ask func(ctx context.Context, i int, p proc) error) {
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	var wg sync.WaitGroup
	for i, p := range procs {
		if p.command {
			infos[i].Missing = "a command proc (WithCommand): it runs a command, not this program, so it has no Go " + what + " of monarch's"
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := ask(ctx, i, p)
			switch {
			case err == nil:
			case ctx.Err() != nil:
				infos[i].Missing = late
			default:
				infos[i].Missing = err.Error()
			}
		}()
	}
	wg.Wait()
}
