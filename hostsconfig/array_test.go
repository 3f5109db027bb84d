package hostsconfig

import (
	"slices"
	"strings"
	"testing"

	"github.com/monarch-go/monarch/internal/arrayspec"
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

// TestJobArrayWithSpec: --array's spec replaces the file's, its tasks
// taking the file's columns in order, only with as many tasks; fail_fast
// is read and kept; Task finds a task by index.
func TestJobArrayWithSpec(t *testing.T) {
	j := loadSPMD(t, "[array]\nspec = \"0-1\"\nfail_fast = true\nenv.P = [\"a\", \"b\"]")
	if !j.Array.FailFast || !strings.Contains(j.Array.describe(), "a failed task stops the rest (fail_fast)") {
		t.Errorf("fail_fast: %+v, %q", j.Array, j.Array.describe())
	}
	sp, _ := arrayspec.Parse("5,9%1")
	a, err := j.Array.WithSpec(sp, "job.toml")
	if err != nil {
		t.Fatal(err)
	}
	if task, ok := a.Task(9); !ok || !slices.Equal(task.Env, []string{"P=b"}) || !a.FailFast || a.Spec.Limit != 1 {
		t.Errorf("WithSpec(5,9%%1): %+v", a)
	}
	if _, ok := a.Task(0); ok {
		t.Error("Task(0) of 5,9")
	}
	sp, _ = arrayspec.Parse("0-2")
	if _, err := j.Array.WithSpec(sp, "job.toml"); err == nil || !strings.Contains(err.Error(), `--array 0-2 gives 3 tasks, but [array] in job.toml has parameters for 2 (spec "0-1")`) {
		t.Errorf("a count mismatch: %v", err)
	}
	var none *Array
	if a, err := none.WithSpec(sp, ""); err != nil || len(a.Tasks) != 3 || a.Tasks[2].Index != 2 {
		t.Errorf("no [array]: %+v, %v", a, err)
	}
}
