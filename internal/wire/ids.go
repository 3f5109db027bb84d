package wire

import "fmt"

// ValidID reports whether s can name a proc or a mesh: dot-separated
// tokens of letters, digits, '_' and '-'. Ids become NATS subject tokens,
// so a wildcard, a space or an empty token must not get in.
func ValidID(s string) bool {
	if s == "" || len(s) > 256 {
		return false
	}
	dot := true // at a token's start
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '.':
			if dot {
				return false
			}
			dot = true
		case c == '_' || c == '-' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z':
			dot = false
		default:
			return false
		}
	}
	return !dot
}

// CheckIDs fails on the first of ids that is not ValidID, naming it as a
// what id.
func CheckIDs(what string, ids []string) error {
	for _, id := range ids {
		if !ValidID(id) {
			return fmt.Errorf("%s id %.40q", what, id)
		}
	}
	return nil
}
