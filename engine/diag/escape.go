package diag

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// Escape makes text from elsewhere (a spec's name, a file name, a value, a
// provider's message) safe inside a line setpoint prints: a newline in it
// would start a line of its own (in a plan's diff block, a change that is
// not in the plan), a terminal escape or a C1 control would drive the
// console, and a bidi control would show the line in another order than
// it is. Such characters are written as Go escapes (\n, \x1b, \u202e), as
// are line and paragraph separators, the other invisible format
// characters and bytes that are not UTF-8; every other character (→, ∕,
// µ, a backslash) stays as it is, so ordinary text does not change.
func Escape(s string) string {
	i := firstHidden(s)
	if i < 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	b.WriteString(s[:i])
	for i < len(s) {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			writeHex(&b, `\x`, uint32(s[i]), 2)
		case !hidden(r):
			b.WriteString(s[i : i+n])
		case r < utf8.RuneSelf:
			if e, ok := shortEscapes[byte(r)]; ok {
				b.WriteString(e)
			} else {
				writeHex(&b, `\x`, uint32(r), 2)
			}
		case r <= 0xFFFF:
			writeHex(&b, `\u`, uint32(r), 4)
		default:
			writeHex(&b, `\U`, uint32(r), 8)
		}
		i += n
	}
	return b.String()
}

// firstHidden is the index of the first byte Escape rewrites, or -1.
func firstHidden(s string) int {
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c < 0x20 || c == 0x7F {
				return i
			}
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if (r == utf8.RuneError && n == 1) || hidden(r) {
			return i
		}
		i += n
	}
	return -1
}

// hidden reports whether a rune does something other than show itself:
// controls (C0, DEL, C1), format characters (the bidi embeddings,
// overrides, isolates and marks among them, zero-width characters, tag
// characters) and the line and paragraph separators.
func hidden(r rune) bool {
	return unicode.IsControl(r) || unicode.In(r, unicode.Cf, unicode.Zl, unicode.Zp)
}

var shortEscapes = map[byte]string{
	'\a': `\a`, '\b': `\b`, '\f': `\f`, '\n': `\n`, '\r': `\r`, '\t': `\t`, '\v': `\v`,
}

func writeHex(b *strings.Builder, prefix string, v uint32, digits int) {
	const hex = "0123456789abcdef"
	b.WriteString(prefix)
	for shift := (digits - 1) * 4; shift >= 0; shift -= 4 {
		b.WriteByte(hex[(v>>uint(shift))&0xF])
	}
}
