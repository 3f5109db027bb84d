// Package didyoumean finds the word a user probably meant: the closest of
// the known words by edit distance, for the did-you-mean of an unknown
// job.toml or hosts.toml key and of an unknown command or flag.
package didyoumean

import (
	"math"
	"strings"
)

// Closest returns the word of known closest to k, if one is close enough
// to be a likely typo, or "". Case is ignored in k; known is lower case.
func Closest(k string, known []string) string {
	best, bestDist, limit := "", math.MaxInt, max(1, len(k)/3)
	lower := strings.ToLower(k)
	for _, c := range known {
		if max(len(lower)-len(c), len(c)-len(lower)) > limit {
			continue // at least that many edits: too far, and not worth computing
		}
		d := editDistance(lower, c)
		if d < bestDist {
			best, bestDist = c, d
		}
	}
	if best != "" && bestDist <= limit {
		return best
	}
	for _, c := range known { // "timeout" for "connect_timeout"
		if len(k) >= 4 && (strings.Contains(c, k) || strings.Contains(k, c)) {
			return c
		}
	}
	return ""
}

// editDistance is the edit distance between a and b, in bytes, counting
// a swap of two neighbours as one edit ("prot" for "port").
func editDistance(a, b string) int {
	// Rows i-2, i-1 and i of the table of distances between prefixes,
	// on the stack for the short keys of a schema.
	var buf [3 * 32]int
	rows := buf[:]
	if n := 3 * (len(b) + 1); n > len(rows) {
		rows = make([]int, n)
	}
	prev2, prev, cur := rows[:len(b)+1], rows[len(b)+1:2*(len(b)+1)], rows[2*(len(b)+1):3*(len(b)+1)]
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
}
