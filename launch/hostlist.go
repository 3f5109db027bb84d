package launch

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// maxHostlistNames bounds what one hostlist may expand to: far more than
// any cluster has nodes, far less than a typo like "n[0-999999999]"
// would make us allocate.
const maxHostlistNames = 1_000_000

// ExpandHostlist expands a Slurm hostlist, the compressed form of
// SLURM_JOB_NODELIST and `scontrol show hostnames`, into host names, in
// Slurm's order: "n[01-03,7],gpu5" gives n01 n02 n03 n7 gpu5.
//
// Items are separated by commas outside brackets (and, as Slurm also
// accepts, blanks). A bracket group holds numbers and lo-hi ranges
// separated by commas; a number is written with the width of the one it
// comes from, the lower bound for a range, so zero padding survives. An
// item with several groups expands to their cartesian product, the first
// group varying slowest: "a[1-2]-b[3-4]" gives a1-b3 a1-b4 a2-b3 a2-b4.
//
// It refuses an empty list, unclosed, stray or nested brackets, empty
// groups, ranges that are not numbers or that go down, and lists that
// would expand to more than 1,000,000 names.
func ExpandHostlist(s string) ([]string, error) {
	items, err := splitHostlist(s)
	if err != nil {
		return nil, fmt.Errorf("hostlist %q: %w", s, err)
	}
	if len(items) == 0 {
		return nil, fmt.Errorf("hostlist %q: no host names", s)
	}
	parsed := make([][]hostSegment, len(items))
	total := 0
	for i, item := range items {
		if parsed[i], err = parseHostItem(item); err != nil {
			return nil, fmt.Errorf("hostlist %q: %w", s, err)
		}
		n := 1
		for _, seg := range parsed[i] {
			if n *= seg.count(); n > maxHostlistNames {
				break
			}
		}
		if total += n; total > maxHostlistNames {
			return nil, fmt.Errorf("hostlist %q: expands to more than %d names", s, maxHostlistNames)
		}
	}
	names := make([]string, 0, total)
	for _, segs := range parsed {
		names = expandHostItem(names, segs)
	}
	return names, nil
}

// splitHostlist splits s at the separators outside brackets, checking
// that brackets pair up.
func splitHostlist(s string) ([]string, error) {
	var items []string
	start, open := 0, -1
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '[':
			if open >= 0 {
				return nil, fmt.Errorf(`"[" at offset %d inside brackets`, i)
			}
			open = i
		case c == ']':
			if open < 0 {
				return nil, fmt.Errorf(`"]" at offset %d without "["`, i)
			}
			open = -1
		case open < 0 && (c == ',' || c == ' ' || c == '\t' || c == '\n'):
			if i > start {
				items = append(items, s[start:i])
			}
			start = i + 1
		}
	}
	if open >= 0 {
		return nil, fmt.Errorf(`"[" at offset %d is not closed`, open)
	}
	if start < len(s) {
		items = append(items, s[start:])
	}
	return items, nil
}

// hostSegment is a piece of an item: literal text, or a bracket group.
type hostSegment struct {
	text   string
	ranges []hostRange // nil for text
}

// hostRange is lo-hi (lo alone: hi == lo), printed width digits wide.
type hostRange struct {
	lo, hi uint64
	width  int
}

func (s hostSegment) count() int {
	if s.ranges == nil {
		return 1
	}
	n := 0
	for _, r := range s.ranges {
		// hi-lo may be near 2^64: compare before adding 1. The caller
		// only needs to know when it is too many.
		if r.hi-r.lo >= maxHostlistNames {
			return maxHostlistNames + 1
		}
		if n += int(r.hi-r.lo) + 1; n > maxHostlistNames {
			return n
		}
	}
	return n
}

// parseHostItem splits one item into text and bracket groups; brackets
// are known to pair up.
func parseHostItem(item string) ([]hostSegment, error) {
	var segs []hostSegment
	for item != "" {
		open := strings.IndexByte(item, '[')
		if open < 0 {
			segs = append(segs, hostSegment{text: item})
			break
		}
		if open > 0 {
			segs = append(segs, hostSegment{text: item[:open]})
		}
		end := open + strings.IndexByte(item[open:], ']')
		ranges, err := parseHostRanges(item[open+1 : end])
		if err != nil {
			return nil, fmt.Errorf("%s: %w", item, err)
		}
		segs = append(segs, hostSegment{ranges: ranges})
		item = item[end+1:]
	}
	return segs, nil
}

// parseHostRanges parses the inside of a bracket group: "01-03,7".
func parseHostRanges(group string) ([]hostRange, error) {
	if group == "" {
		return nil, errors.New("empty brackets")
	}
	var ranges []hostRange
	for _, part := range strings.Split(group, ",") {
		loS, hiS, isRange := strings.Cut(part, "-")
		if !isRange {
			hiS = loS
		}
		lo, err1 := parseHostNumber(loS)
		hi, err2 := parseHostNumber(hiS)
		switch {
		case part == "":
			return nil, fmt.Errorf("empty range in [%s]", group)
		case err1 != nil || err2 != nil:
			return nil, fmt.Errorf("range %q: want a number or lo-hi", part)
		case hi < lo:
			return nil, fmt.Errorf("range %q goes down", part)
		}
		ranges = append(ranges, hostRange{lo: lo, hi: hi, width: len(loS)})
	}
	return ranges, nil
}

// parseHostNumber accepts decimal digits only: no signs, no blanks.
func parseHostNumber(s string) (uint64, error) {
	if s == "" || strings.Trim(s, "0123456789") != "" {
		return 0, errors.New("not a number")
	}
	return strconv.ParseUint(s, 10, 64)
}

// expandHostItem appends the names of one item to names.
func expandHostItem(names []string, segs []hostSegment) []string {
	prefixes := []string{""}
	for _, seg := range segs {
		if seg.ranges == nil {
			for i := range prefixes {
				prefixes[i] += seg.text
			}
			continue
		}
		next := make([]string, 0, len(prefixes)*seg.count())
		for _, p := range prefixes {
			for _, r := range seg.ranges {
				for n := r.lo; ; n++ {
					next = append(next, p+padNumber(n, r.width))
					if n == r.hi {
						break
					}
				}
			}
		}
		prefixes = next
	}
	return append(names, prefixes...)
}

// padNumber writes n in decimal, zero-padded to width digits.
func padNumber(n uint64, width int) string {
	d := strconv.FormatUint(n, 10)
	if len(d) >= width {
		return d
	}
	return strings.Repeat("0", width-len(d)) + d
}
