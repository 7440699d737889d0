package diag

import "unicode/utf8"

// Cut makes text from elsewhere (a value read from a cluster, a provider's
// why, a field of a trace) fit a message: at most max bytes of it, cut on a
// rune so the message stays valid UTF-8, and "…" after what was cut. Text
// of max bytes or fewer is returned as it is.
func Cut(s string, max int) string {
	if len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
