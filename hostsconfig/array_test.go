package hostsconfig

import (
	"slices"
	"strings"
	"testing"
)

// TestJobArray: [array] gives the spec's indices and bound, and task k
// the k-th entry of every env column and of args, in index order (bad
// arrays are in testdata/bad/job-array-*).
func TestJobArray(t *testing.T) {
	j, err := LoadJob("testdata/good/job-array.toml")
	if err != nil {
		t.Fatal(err)
	}
	a := j.Array
	if a == nil {
		t.Fatal("no Array")
	}
	if !slices.Equal(a.Spec.Indices, []int{0, 2, 4, 6}) || a.Spec.Limit != 2 || a.Spec.String() != "0-6:2%2" {
		t.Errorf("spec %v %%%d (%s), want 0,2,4,6 %%2", a.Spec.Indices, a.Spec.Limit, a.Spec)
	}
	want := []ArrayTask{
		{0, []string{"LR=0.1", "OPT=sgd"}, []string{"--seed", "1"}},
		{2, []string{"LR=0.01", "OPT=sgd"}, []string{"--seed", "2"}},
		{4, []string{"LR=0.001", "OPT=adam"}, []string{"--seed", "3"}},
		{6, []string{"LR=0.0001", "OPT=adam"}, []string{}},
	}
	if len(a.Tasks) != len(want) {
		t.Fatalf("%d tasks, want %d", len(a.Tasks), len(want))
	}
	for k, w := range want {
		g := a.Tasks[k]
		if g.Index != w.Index || !slices.Equal(g.Env, w.Env) || !slices.Equal(g.Args, w.Args) {
			t.Errorf("task %d: %+v, want %+v", k, g, w)
		}
	}
	if got, want := j.Describe()[strings.LastIndex(j.Describe(), "\n")+1:], "array: 4 tasks (0-6:2%2), at most 2 at once; each with its own LR, OPT, args"; got != want {
		t.Errorf("describes it as %q, want %q", got, want)
	}
	if !slices.Equal(j.Env, []string{"DATA=/data"}) || !slices.Equal(j.Args, []string{"-c", "train"}) {
		t.Errorf("the job's own env %v and args %v changed", j.Env, j.Args)
	}
}

// TestJobArrayMinimal: a spec alone gives tasks with no parameters of
// their own; a job without [array] has none.
func TestJobArrayMinimal(t *testing.T) {
	j := loadSPMD(t, "[array]\nspec = \"1,3,7%1\"")
	if j.Array == nil || len(j.Array.Tasks) != 3 || j.Array.Tasks[2].Index != 7 || j.Array.Spec.Limit != 1 {
		t.Fatalf("array %+v", j.Array)
	}
	for _, task := range j.Array.Tasks {
		if task.Env != nil || task.Args != nil {
			t.Errorf("task %d has parameters %+v", task.Index, task)
		}
	}
	if got, want := j.Array.describe(), "3 tasks (1,3,7%1), at most 1 at once"; got != want {
		t.Errorf("describes it as %q, want %q", got, want)
	}
	if j := loadSPMD(t, ""); j.Array != nil {
		t.Errorf("a job without [array] has %+v", j.Array)
	}
}
