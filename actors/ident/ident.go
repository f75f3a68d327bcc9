// Package ident holds the one id alphabet of warden's entities. Ids become
// workflow inputs, shell arguments and storage keys, so nothing outside
// [a-z0-9][a-z0-9-]{0,62} is let in.
package ident

// Valid reports whether id matches [a-z0-9][a-z0-9-]{0,62}.
func Valid(id string) bool {
	if len(id) == 0 || len(id) > 63 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
		case c == '-' && i > 0:
		default:
			return false
		}
	}
	return true
}
