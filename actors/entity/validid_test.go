package entity

import (
	"strings"
	"testing"
)

func TestValidID(t *testing.T) {
	for id, want := range map[string]bool{
		"m-1": true, "a": true, "0abc": true, "": false, "-a": false, "M-1": false, "m_1": false,
		"m;rm": false, "m 1": false, "é": false,
		strings.Repeat("a", 63): true, strings.Repeat("a", 64): false,
	} {
		if got := ValidID(id); got != want {
			t.Errorf("ValidID(%q) = %t, want %t", id, got, want)
		}
	}
}
