package arrayspec

import (
	"fmt"
	"strconv"
	"strings"
)

// MaxArraySize is Slurm's MaxArraySize by default: indices are below it.
const MaxArraySize = 1001

// Spec is a parsed array: which task indices run, and how many at once.
type Spec struct {
	// Indices are the task indices, ascending, without duplicates; never
	// empty.
	Indices []int
	// Limit is the most tasks that run at once ("%N"); 0: no limit.
	Limit int
}

// Parse reads s in sbatch's --array syntax with indices below MaxArraySize.
func Parse(s string) (Spec, error) { return ParseMax(s, MaxArraySize) }

// ParseMax reads s in sbatch's --array syntax with indices below
// maxSize, a cluster's own MaxArraySize (> 0). Errors name the bad part.
func ParseMax(s string, maxSize int) (Spec, error) {
	if maxSize <= 0 {
		return Spec{}, fmt.Errorf("array size limit %d: must be > 0", maxSize)
	}
	list, limit, hasLimit := strings.Cut(s, "%")
	var sp Spec
	if hasLimit {
		n, err := number(limit)
		if err != nil || n < 1 {
			return Spec{}, fmt.Errorf("array %s: %%%s: the limit after %% must be a number of tasks >= 1", quote(s), clip(limit))
		}
		sp.Limit = n
	}
	if strings.TrimSpace(list) == "" {
		return Spec{}, fmt.Errorf("array %s: no indices (want e.g. 0-15, 1,3,7, 0-15:2)", quote(s))
	}
	// A bitmap bounded by maxSize, as sbatch's: overlapping parts merge
	// and no input makes it bigger.
	in := make([]bool, maxSize)
	for part := range strings.SplitSeq(list, ",") {
		first, last, step, err := readPart(part, maxSize)
		if err != nil {
			return Spec{}, fmt.Errorf("array %s: part %s: %w", quote(s), quote(part), err)
		}
		for i := first; i <= last; i += step {
			in[i] = true
		}
	}
	for i, ok := range in {
		if ok {
			sp.Indices = append(sp.Indices, i)
		}
	}
	return sp, nil
}

// readPart reads one comma-separated part: "A", "A-B" or "A-B:S".
func readPart(part string, maxSize int) (first, last, step int, err error) {
	rng, stepText, hasStep := strings.Cut(part, ":")
	step = 1
	if hasStep {
		step, err = number(stepText)
		if err != nil || step < 1 {
			return 0, 0, 0, fmt.Errorf("step %s must be a number >= 1", quote(stepText))
		}
	}
	a, b, isRange := strings.Cut(rng, "-")
	if hasStep && !isRange {
		return 0, 0, 0, fmt.Errorf("a step needs a range, as in 0-15:%s", clip(stepText))
	}
	if first, err = index(a, maxSize); err != nil {
		return 0, 0, 0, err
	}
	last = first
	if isRange {
		if last, err = index(b, maxSize); err != nil {
			return 0, 0, 0, err
		}
		if last < first {
			return 0, 0, 0, fmt.Errorf("range runs backwards (%d > %d)", first, last)
		}
	}
	return first, last, step, nil
}

// index reads one index, 0 <= i < maxSize.
func index(s string, maxSize int) (int, error) {
	i, err := number(s)
	if err != nil && !isDigits(s) {
		return 0, fmt.Errorf("index %s is not a number", quote(s))
	}
	if err != nil || i >= maxSize { // err: too many digits for an int
		if err != nil {
			return 0, fmt.Errorf("index %s is past the largest, %d (MaxArraySize %d)", clip(s), maxSize-1, maxSize)
		}
		return 0, fmt.Errorf("index %d is past the largest, %d (MaxArraySize %d)", i, maxSize-1, maxSize)
	}
	return i, nil
}

// number reads a non-negative decimal number of digits only (no sign, no
// spaces), as sbatch does; it fails rather than overflow.
func number(s string) (int, error) {
	if !isDigits(s) {
		return 0, fmt.Errorf("%s is not a number", quote(s))
	}
	return strconv.Atoi(s)
}

// clip shortens what an error repeats of its input: a spec is short,
// and a long one is a mistake whose first bytes say enough.
func clip(s string) string {
	const most = 40
	if len(s) > most {
		return s[:most] + "..."
	}
	return s
}

// quote is clip, quoted.
func quote(s string) string { return strconv.Quote(clip(s)) }

func isDigits(s string) bool { return s != "" && strings.TrimLeft(s, "0123456789") == "" }

// String renders the spec in sbatch's form, shortest first: runs of
// consecutive indices as "A-B", other evenly spaced runs of three or more
// as "A-B:S", the rest one by one; then "%N" when limited. Parse of the
// result gives the same spec back.
func (sp Spec) String() string {
	var parts []string
	ix := sp.Indices
	for i := 0; i < len(ix); {
		j := i + 1
		if j < len(ix) {
			step := ix[j] - ix[i]
			for j+1 < len(ix) && ix[j+1]-ix[j] == step {
				j++
			}
			switch {
			case step == 1:
				parts = append(parts, fmt.Sprintf("%d-%d", ix[i], ix[j]))
				i = j + 1
				continue
			case j-i >= 2:
				parts = append(parts, fmt.Sprintf("%d-%d:%d", ix[i], ix[j], step))
				i = j + 1
				continue
			}
		}
		parts = append(parts, strconv.Itoa(ix[i]))
		i++
	}
	s := strings.Join(parts, ",")
	if sp.Limit > 0 {
		s += "%" + strconv.Itoa(sp.Limit)
	}
	return s
}
