package systest

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/pprof/profile"
)

// readProfile parses the profile at path.
func readProfile(t *testing.T, path string) *profile.Profile {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	p, err := profile.Parse(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return p
}

// leaf is the function a sample was taken in.
func leaf(s *profile.Sample) string {
	if len(s.Location) == 0 || len(s.Location[0].Line) == 0 {
		return ""
	}
	return s.Location[0].Line[0].Function.Name
}

// label is s's value of label key ("" without).
func label(s *profile.Sample, key string) string {
	if v := s.Label[key]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// TestProfile: monarch profile of a job whose one endpoint burns CPU
// (Burn of burners[1], in main.profileTestBurnHere) while the other actors
// idle, merged into one profile: that function is on top, its samples
// carry the mesh, endpoint and rank of the actor and the proc's labels; a
// concurrent endpoint's and a ctx.Go function's samples carry theirs; the
// command proc is listed on stderr; --heap gives a heap profile; a
// selection profiles what it selects; bad input is a clear error and
// writes nothing; after the job ends, it says so.
func TestProfile(t *testing.T) {
	state := t.TempDir()
	t.Setenv("MONARCH_STATE_DIR", state)
	h := startLocalJob(t, 2, "inspect", []string{"INSPECT_WORK=burn"}, func(line string) bool { return line == "READY" })
	job := h.job
	dir := t.TempDir()

	cpu := filepath.Join(dir, "cpu.pb.gz")
	out, stderr, code := monarch(t, "profile", job, "--seconds", "2", "-o", cpu)
	if code != 0 || !strings.Contains(out, "job "+job+": CPU profile of 2s of 5 of 6 procs in "+cpu) ||
		!strings.Contains(stderr, "== procs without a profile\nsleepers 0 (") || !strings.Contains(stderr, "a command proc (WithCommand)") {
		t.Fatalf("profile: exit %d\nstdout: %s\nstderr: %s", code, out, stderr)
	}
	p := readProfile(t, cpu)
	if p.PeriodType == nil || p.PeriodType.Type != "cpu" {
		t.Fatalf("not a CPU profile: %v", p.PeriodType)
	}
	flat := map[string]int64{}
	type want struct{ endpoint, rank string }
	wants := map[string]want{
		"main.profileTestBurnHere": {"Burn", "1"},          // an ordinary endpoint
		"main.profileTestSpinHere": {"Spin", "0"},          // a concurrent one
		"main.profileTestGoHere":   {"Kick (ctx.Go)", "0"}, // a ctx.Go function
	}
	labelled, unlabelled := map[string]int{}, map[string]int{}
	procs, burnProcs := map[string]bool{}, map[string]bool{}
	for _, s := range p.Sample {
		fn := leaf(s)
		flat[fn] += s.Value[0]
		procs[label(s, "proc")] = true
		if label(s, "proc") == "" || label(s, "host") == "" || label(s, "procmesh") == "" || label(s, "procrank") == "" {
			t.Errorf("a sample in %s lacks its proc's labels: %v", fn, s.Label)
		}
		w, ok := wants[fn]
		if !ok {
			continue
		}
		if label(s, "endpoint") == "" {
			// Only the call running as the profile began: 40 ms of
			// CPU at most, 4 samples (5 with the first tick).
			unlabelled[fn]++
			continue
		}
		labelled[fn]++
		if fn == "main.profileTestBurnHere" {
			burnProcs[label(s, "proc")] = true
		}
		if label(s, "mesh") != "burners" || label(s, "endpoint") != w.endpoint || label(s, "rank") != w.rank ||
			label(s, "procmesh") != "workers" || label(s, "procrank") != w.rank || label(s, "host") != "h0" {
			t.Errorf("a sample in %s has labels %v; want mesh burners, endpoint %s, rank %s, on workers %[3]s on h0", fn, s.Label, w.endpoint, w.rank)
		}
	}
	for fn := range wants {
		if labelled[fn] == 0 || unlabelled[fn] > 5 {
			t.Errorf("%s: %d labelled samples, %d unlabelled; want some, and at most 5 unlabelled", fn, labelled[fn], unlabelled[fn])
		}
	}
	if len(burnProcs) != 1 {
		t.Errorf("Burn of burners[1] ran on procs %v; want one", burnProcs)
	}
	var top string
	for fn, v := range flat {
		if top == "" || v > flat[top] {
			top = fn
		}
	}
	if top != "main.profileTestBurnHere" {
		t.Errorf("top function %s (%d samples); main.profileTestBurnHere has %d", top, flat[top], flat["main.profileTestBurnHere"])
	}
	// Idle procs may have no samples: the comment counts the profiles merged.
	if !slices.Contains(p.Comments, "monarch profile of job "+job+": 5 procs") || len(procs) < 2 {
		t.Errorf("comments %q; samples of procs %v", p.Comments, procs)
	}
	if gobin, err := exec.LookPath("go"); err == nil {
		top, err := exec.Command(gobin, "tool", "pprof", "-top", cpu).CombinedOutput()
		lines := strings.Split(string(top), "\n")
		i := slices.IndexFunc(lines, func(l string) bool { return strings.Contains(l, "flat%") })
		if err != nil || i < 0 || i+1 >= len(lines) || !strings.HasSuffix(lines[i+1], " main.profileTestBurnHere") {
			t.Errorf("go tool pprof -top %s: %v\n%s", cpu, err, top)
		}
	}

	// Heap profiles.
	heap := filepath.Join(dir, "heap.pb.gz")
	out, stderr, code = monarch(t, "profile", job, "--heap", "-o", heap)
	if code != 0 || !strings.Contains(out, "heap profile of 5 of 6 procs") {
		t.Fatalf("profile --heap: exit %d\nstdout: %s\nstderr: %s", code, out, stderr)
	}
	hp := readProfile(t, heap)
	types := make([]string, len(hp.SampleType))
	for i, st := range hp.SampleType {
		types[i] = st.Type
	}
	if !slices.Contains(types, "inuse_space") || len(hp.Sample) == 0 || label(hp.Sample[0], "proc") == "" {
		t.Errorf("heap profile: sample types %v, %d samples", types, len(hp.Sample))
	}

	// A selection.
	one := filepath.Join(dir, "one.pb.gz")
	out, stderr, code = monarch(t, "profile", job, "--mesh", "workers", "--rank", "1", "--seconds", "1", "-o", one)
	if code != 0 || !strings.Contains(out, "CPU profile of 1s of 1 of 1 procs") || stderr != "" {
		t.Fatalf("profile --mesh workers --rank 1: exit %d\nstdout: %s\nstderr: %s", code, out, stderr)
	}
	for _, s := range readProfile(t, one).Sample {
		if label(s, "procmesh") != "workers" || label(s, "procrank") != "1" {
			t.Fatalf("a sample of another proc than workers 1: %v", s.Label)
		}
	}

	// Bad input: an error that says what is wrong, and no file.
	bad := filepath.Join(dir, "bad.pb.gz")
	for _, tt := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--rank", "9", "--seconds", "1"}, 1, "no rank 9: mesh workers has ranks 0-3, mesh sleepers has ranks 0-0"},
		{[]string{"--mesh", "nope", "--seconds", "1"}, 1, `no proc mesh "nope"; the job's proc meshes: workers, sleepers`},
		{[]string{"--host", "h7", "--seconds", "1"}, 1, `no proc of the job on host "h7"`},
		{[]string{"--seconds", "0"}, 1, "--seconds 0: want 1 to 300"},
		{[]string{"--seconds", "301"}, 1, "--seconds 301: want 1 to 300"},
		{[]string{"--heap", "--seconds", "2"}, 1, "--seconds 2 with --heap: a heap profile is taken at once"},
		{[]string{"--timeout", "0s"}, 1, "--timeout 0s: want a positive duration"},
	} {
		_, stderr, code := monarch(t, append([]string{"profile", job, "-o", bad}, tt.args...)...)
		if code != tt.code || !strings.Contains(stderr, tt.want) {
			t.Errorf("profile %v: exit %d, stderr %q; want %d and %q", tt.args, code, stderr, tt.code, tt.want)
		}
	}
	if _, stderr, code := monarch(t, "profile", job, "--seconds", "1"); code != 2 || !strings.Contains(stderr, "-o FILE is required") {
		t.Errorf("profile without -o: exit %d, stderr %q", code, stderr)
	}
	if _, stderr, code := monarch(t, "profile", job, "-o", filepath.Join(dir, "no", "such", "x.pb.gz")); code != 1 || !strings.Contains(stderr, "no dir "+filepath.Join(dir, "no", "such")) {
		t.Errorf("profile -o in a missing dir: exit %d, stderr %q", code, stderr)
	}
	if _, stderr, code := monarch(t, "profile", "nosuchjob", "-o", bad); code != 1 || !strings.Contains(stderr, `no job "nosuchjob"`) {
		t.Errorf("profile nosuchjob: exit %d, stderr %q", code, stderr)
	}

	if _, stderr, code := monarch(t, "stop", job); code != 0 {
		t.Fatalf("stop: exit %d: %s", code, stderr)
	}
	h.wait(t)
	_, stderr, code = monarch(t, "profile", job, "--seconds", "1", "-o", bad)
	if code != 1 || !strings.Contains(stderr, "profile: job "+job+" has ended (") || !strings.Contains(stderr, "monarch logs "+job) {
		t.Errorf("profile of an ended job: exit %d, stderr %q", code, stderr)
	}
	// Nothing but the profiles written: no temporary file left, no bad.pb.gz.
	entries, _ := os.ReadDir(dir)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if got := strings.Join(names, " "); got != "cpu.pb.gz heap.pb.gz one.pb.gz" {
		t.Errorf("files in the output dir: %s", got)
	}
}
