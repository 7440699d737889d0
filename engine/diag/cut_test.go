package diag

import (
	"testing"
	"unicode/utf8"
)

func TestCut(t *testing.T) {
	for _, c := range []struct {
		s    string
		max  int
		want string
	}{
		{"", 4, ""},
		{"abcd", 4, "abcd"},
		{"abcde", 4, "abcd…"},
		// "é" is 2 bytes (3–4): a cut at 4 would split it, so it goes whole.
		{"abcéf", 4, "abc…"},
		{"abcéf", 5, "abcé…"},
		// "€" is 3 bytes (0–2): no whole rune fits in 2.
		{"€€", 2, "…"},
		{"€€", 3, "€…"},
		{"abc", 0, "…"},
	} {
		got := Cut(c.s, c.max)
		if got != c.want {
			t.Errorf("Cut(%q, %d) = %q, want %q", c.s, c.max, got, c.want)
		}
		if !utf8.ValidString(got) {
			t.Errorf("Cut(%q, %d) = %q: not valid UTF-8", c.s, c.max, got)
		}
	}
}
