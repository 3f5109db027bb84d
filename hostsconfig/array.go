package hostsconfig

import (
	"fmt"
	"strings"

	"github.com/monarch-go/monarch/internal/arrayspec"
)

// Array is the [array] table of a job: the job runs as a job array, one
// task per index of Spec, at most Spec.Limit at once.
//
//	[array]
//	spec = "0-3%2"
//	fail_fast = false
//	env.LR = ["0.1", "0.01", "0.001", "0.0001"]
//	args = [["--seed", "1"], ["--seed", "2"], ["--seed", "3"], ["--seed", "4"]]
//
// Per-task parameters are columns: each env variable, and args, has one
// entry per task, the k-th for the k-th index of spec in ascending order.
type Array struct {
	// Spec is the array's indices and bound, in sbatch's --array syntax.
	Spec arrayspec.Spec
	// Tasks are the tasks, one per index of Spec, in the same order.
	Tasks []ArrayTask
	// FailFast stops the array when a task fails: the running tasks are
	// stopped and the pending ones never start (fail_fast = true). By
	// default a failed task leaves its siblings to run.
	FailFast bool
}

// ArrayTask is one task of an array and its own parameters.
type ArrayTask struct {
	// Index is the task's index in the array (MONARCH_ARRAY_INDEX).
	Index int
	// Env holds "KEY=value" entries the task adds to the job's env, in
	// the order the file writes the columns.
	Env []string
	// Args are appended to the job's args for this task; nil when the
	// file gives no args column.
	Args []string
}

func readArray(t *table, spmd bool) *Array {
	if t == nil {
		return nil
	}
	t.unknown("spec", "env", "args", "fail_fast")
	var s string
	switch {
	case !t.has("spec"):
		t.missing("spec")
		return nil
	case !t.str("spec", &s):
		return nil
	}
	sp, err := arrayspec.Parse(s)
	if err != nil {
		t.fail("spec", "%v", err)
		return nil
	}
	a := &Array{Spec: sp, Tasks: make([]ArrayTask, len(sp.Indices))}
	t.boolean("fail_fast", &a.FailFast)
	for k, i := range sp.Indices {
		a.Tasks[k].Index = i
	}
	if env := t.sub("env"); env != nil {
		for _, name := range env.children() {
			var col []string
			switch {
			case !env.has(name), !env.envName(name):
			case env.column(name, len(a.Tasks), &col):
				for k, v := range col {
					a.Tasks[k].Env = append(a.Tasks[k].Env, name+"="+v)
				}
			}
		}
	}
	if t.has("args") && spmd {
		t.fail("args", "an [spmd] job takes its arguments in its command; give a task its own values with env")
		return a
	}
	t.argsColumn(a)
	return a
}

// column reads k as an array of strings with one entry per task.
func (t *table) column(k string, tasks int, dst *[]string) bool {
	var col []string
	if !t.strings(k, &col) {
		return false
	}
	if len(col) != tasks {
		t.fail(k, "has %d entries for the %d tasks of array.spec (one per task, in index order)", len(col), tasks)
		return false
	}
	*dst = col
	return true
}

// argsColumn reads array.args: one array of strings per task.
func (t *table) argsColumn(a *Array) {
	v, ok := t.m["args"]
	if !ok {
		return
	}
	rows, ok := v.([]any)
	if !ok {
		t.fail("args", `want one array of arguments per task, such as [["--lr", "0.1"], ["--lr", "0.01"]], got %s`, describeValue(v))
		return
	}
	if len(rows) != len(a.Tasks) {
		t.fail("args", "has %d entries for the %d tasks of array.spec (one per task, in index order)", len(rows), len(a.Tasks))
		return
	}
	args, good := make([][]string, len(rows)), true
	for k, row := range rows {
		r, ok := row.([]any)
		if !ok {
			t.failElem("args", elem(k), "want an array of strings (task %d's arguments), got %s", a.Tasks[k].Index, describeValue(row))
			good = false
			continue
		}
		args[k] = make([]string, 0, len(r))
		for _, e := range r {
			s, ok := e.(string)
			if !ok {
				t.failElem("args", elem(k), "want strings (task %d's arguments), got %s", a.Tasks[k].Index, describeValue(e))
				good = false
				break
			}
			args[k] = append(args[k], s)
		}
	}
	if !good {
		return
	}
	for k := range a.Tasks {
		a.Tasks[k].Args = args[k]
	}
}

// describe says what the array runs, for config check: "4 tasks
// (0-6:2%2), at most 2 at once; each with its own LR, OPT, args".
func (a *Array) describe() string {
	s := fmt.Sprintf("%d tasks (%s)", len(a.Tasks), a.Spec)
	if a.Spec.Limit > 0 {
		s += fmt.Sprintf(", at most %d at once", a.Spec.Limit)
	}
	var own []string
	for _, kv := range a.Tasks[0].Env { // every task has the same columns
		name, _, _ := strings.Cut(kv, "=")
		own = append(own, name)
	}
	if a.Tasks[0].Args != nil {
		own = append(own, "args")
	}
	if len(own) > 0 {
		s += "; each with its own " + strings.Join(own, ", ")
	}
	if a.FailFast {
		s += "; a failed task stops the rest (fail_fast)"
	}
	return s
}

// WithSpec is the array that --array SPEC makes of a job whose file has
// a (nil: no [array]): the file's columns, with the flag's spec in place
// of the file's, which must then give as many tasks as the columns have
// entries. FailFast stays the file's.
func (a *Array) WithSpec(sp arrayspec.Spec, path string) (*Array, error) {
	out := &Array{Spec: sp, Tasks: make([]ArrayTask, len(sp.Indices))}
	if a != nil {
		if len(a.Tasks) != len(sp.Indices) && a.hasColumns() {
			return nil, fmt.Errorf("--array %s gives %d tasks, but [array] in %s has parameters for %d (spec %q): give as many tasks as its columns have entries",
				sp, len(sp.Indices), path, len(a.Tasks), a.Spec.String())
		}
		out.FailFast = a.FailFast
	}
	for k, i := range sp.Indices {
		out.Tasks[k].Index = i
		if a != nil && a.hasColumns() {
			out.Tasks[k].Env, out.Tasks[k].Args = a.Tasks[k].Env, a.Tasks[k].Args
		}
	}
	return out, nil
}

// hasColumns reports whether the array gives its tasks parameters.
func (a *Array) hasColumns() bool {
	return len(a.Tasks) > 0 && (len(a.Tasks[0].Env) > 0 || a.Tasks[0].Args != nil)
}

// Task returns the task of index i; false when i is not one of the spec's.
func (a *Array) Task(i int) (ArrayTask, bool) {
	for _, t := range a.Tasks {
		if t.Index == i {
			return t, true
		}
	}
	return ArrayTask{}, false
}
