package launch

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/monarch-go/monarch/internal/arrayspec"
	"github.com/monarch-go/monarch/internal/jobstate"
)

// ArrayTasks are the records of the tasks of array id in jobs, by index.
func ArrayTasks(jobs []*JobState, id string) []*JobState {
	var tasks []*JobState
	for _, j := range jobs {
		if j.ArrayJob == id {
			tasks = append(tasks, j)
		}
	}
	slices.SortFunc(tasks, func(a, b *JobState) int { return cmp.Compare(a.ArrayIndex, b.ArrayIndex) })
	return tasks
}

// ArraySummary counts an array's tasks by state: "4 tasks: 1 pending,
// 1 running, 1 done, 1 failed (2)", the failed indices in parentheses;
// stopped and lost tasks when there are some.
func ArraySummary(tasks []*JobState) string {
	var pending, running, done, stopped, lost int
	var failed []string
	for _, t := range tasks {
		switch t.State {
		case StatePending, StateSubmitted:
			pending++
		case StateStarting, StateRunning:
			running++
		case StateDone:
			done++
		case StateStopped:
			stopped++
		case StateLost:
			lost++
		default:
			failed = append(failed, strconv.Itoa(t.ArrayIndex))
		}
	}
	s := fmt.Sprintf("%d tasks: %d pending, %d running, %d done, %d failed", len(tasks), pending, running, done, len(failed))
	if len(failed) > 0 {
		s += " (" + strings.Join(failed, ",") + ")"
	}
	if stopped > 0 {
		s += fmt.Sprintf(", %d stopped", stopped)
	}
	if lost > 0 {
		s += fmt.Sprintf(", %d lost", lost)
	}
	return s
}

// taskRef reads a reference to a task of an array: ARRAY:i or ARRAY_i.
func taskRef(ref string) (array string, index int, ok bool) {
	cut := strings.LastIndexAny(ref, ":_")
	if cut <= 0 {
		return "", 0, false
	}
	digits := ref[cut+1:]
	if digits == "" || len(digits) > 4 || strings.Trim(digits, "0123456789") != "" {
		return "", 0, false
	}
	i, err := strconv.Atoi(digits)
	if err != nil || i >= arrayspec.MaxArraySize {
		return "", 0, false
	}
	return ref[:cut], i, true
}

// arrayQueue asks a queue about the tasks of a batch array once for the
// whole array (see Status), not once per task.
type arrayQueue struct {
	arrays map[string]*JobState // by job id, those in a queue
	states map[string]map[int]batchState
}

func newArrayQueue(jobs []*JobState) *arrayQueue {
	a := &arrayQueue{arrays: map[string]*JobState{}, states: map[string]map[int]batchState{}}
	for _, j := range jobs {
		if j.Array != "" && batchQueue(j) != nil {
			a.arrays[j.Job] = j
		}
	}
	return a
}

// state is what the queue says of task s of a batch array; false when s
// is no such task or the queue does not say of it.
func (a *arrayQueue) state(ctx context.Context, s *JobState) (batchState, bool) {
	arr := a.arrays[s.ArrayJob]
	if arr == nil {
		return batchState{}, false
	}
	states, asked := a.states[arr.BatchID]
	if !asked {
		states = batchQueue(arr).arrayStates(ctx, arr.BatchID)
		a.states[arr.BatchID] = states
	}
	b, ok := states[s.ArrayIndex]
	return b, ok
}

// settle brings the record of each batch array in jobs up to date with its
// tasks: running once one runs, and ended, with its summary, once all
// have (the queue says so of each, and no launcher of the array's own
// records it when it runs detached).
func (a *arrayQueue) settle(dir string, jobs []*JobState) {
	for _, arr := range a.arrays {
		if !arr.Active() {
			continue
		}
		tasks := ArrayTasks(jobs, arr.Job)
		active, started := 0, false
		for _, t := range tasks {
			if t.Active() {
				active++
			}
			if t.State != StateSubmitted {
				started = true
			}
		}
		switch {
		case active > 0 && started:
			arr.State = StateRunning
		case active > 0:
			continue
		default:
			arr.State, arr.Exit = arrayEnd(tasks, nil)
			arr.End = ArraySummary(tasks)
			arr.Ended = time.Now()
		}
		state, exit, end, ended := arr.State, arr.Exit, arr.End, arr.Ended
		jobstate.Amend(dir, arr.Job, func(r *JobState) bool {
			if !r.Active() || r.State == state {
				return false
			}
			r.State, r.Exit, r.End, r.Ended = state, exit, end, ended
			return true
		})
	}
}

// stopBatchArray stops every task of batch array s: those that wait in
// the queue are cancelled there, the running ones' launchers asked to
// stop (their programs get their stop grace).
func stopBatchArray(ctx context.Context, dir string, s *JobState, jobs []*JobState, q queue) error {
	tasks := ArrayTasks(jobs, s.Job)
	for _, t := range tasks {
		if t.Active() {
			requestStop(dir, t.Job)
		}
	}
	if err := q.cancelArray(ctx, s.BatchID); err != nil {
		return fmt.Errorf("stop %s: %w", s.Job, err)
	}
	for _, t := range tasks {
		if t.State == StateSubmitted && endTask(dir, t.Job, StateSubmitted, StateStopped, 0, "stopped by monarch stop before it ran") {
			os.Remove(stopRequestPath(dir, t.Job))
		}
	}
	return nil
}
