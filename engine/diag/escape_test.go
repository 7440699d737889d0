package diag

import (
	"strconv"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/setpoint-dev/setpoint/cue/spec"
)

func TestEscape(t *testing.T) {
	for _, c := range []struct{ s, want string }{
		{"", ""},
		// Ordinary text, Unicode included, is left alone.
		{"sim:Deployment∕prod∕payments 3 → 300 µs", "sim:Deployment∕prod∕payments 3 → 300 µs"},
		{`a\nb "q" ['k']`, `a\nb "q" ['k']`},
		{"inv\n+ x\r\n.yaml", `inv\n+ x\r\n.yaml`},
		{"\t\a\b\f\v", `\t\a\b\f\v`},
		{"\x1b[31mred\x1b[0m\x00\x7f", `\x1b[31mred\x1b[0m\x00\x7f`},
		// C1 controls: NEL is a newline to some terminals, CSI an escape.
		{"a\u0085b\u009b2J", `a\u0085b\u009b2J`},
		{"gnp\u202eexe.yaml", `gnp\u202eexe.yaml`},
		{"\u200e\u200f\u202a\u202b\u202c\u202d\u2066\u2067\u2068\u2069\u061c", `\u200e\u200f\u202a\u202b\u202c\u202d\u2066\u2067\u2068\u2069\u061c`},
		{"a\u2028b\u2029c", `a\u2028b\u2029c`},
		{"zero\u200bwidth\ufeff", `zero\u200bwidth\ufeff`},
		{"tag\U000E0041", `tag\U000e0041`},
		{"bad\xffutf8\xc3", `bad\xffutf8\xc3`},
	} {
		if got := Escape(c.s); got != c.want {
			t.Errorf("Escape(%q) = %q, want %q", c.s, got, c.want)
		}
	}
}

// FuzzEscape: what Escape writes has no character that is not itself on
// screen, is valid UTF-8, and (for text without a backslash or a quote,
// which it leaves alone) reads back as Go reads a quoted string to what
// it was given; text with nothing to escape is returned unchanged.
func FuzzEscape(f *testing.F) {
	for _, s := range []string{"", "plain → text", "inv\n+ x", "\x1b[2J", "\u202e", "\xff\xfe", "\u0085", "\U000E0041"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := Escape(s)
		if !utf8.ValidString(got) {
			t.Fatalf("Escape(%q) = %q: not UTF-8", s, got)
		}
		for _, r := range got {
			if unicode.IsControl(r) || unicode.In(r, unicode.Cf, unicode.Zl, unicode.Zp) {
				t.Fatalf("Escape(%q) = %q: %U left in", s, got, r)
			}
		}
		plain := utf8.ValidString(s)
		for _, r := range s {
			plain = plain && !unicode.IsControl(r) && !unicode.In(r, unicode.Cf, unicode.Zl, unicode.Zp)
		}
		if plain && got != s {
			t.Fatalf("Escape(%q) = %q: changed text with nothing to escape", s, got)
		}
		if strings.ContainsAny(s, `\"`) {
			return
		}
		back, err := strconv.Unquote(`"` + got + `"`)
		if err != nil || back != s {
			t.Fatalf("Escape(%q) = %q reads back as %q (%v)", s, got, back, err)
		}
	})
}

// A diagnostic prints on one line whatever its file name holds.
func TestDiagnosticErrorIsOneLine(t *testing.T) {
	d := Diagnostic{Pos: spec.Pos{File: "inv\n+ sim:Deployment/prod/payments\x1b[32m\u202e.yaml", Line: 1, Col: 1}, Message: "bad\nvalue"}
	got := d.Error()
	if strings.ContainsAny(got, "\n\x1b\u202e") || !strings.Contains(got, `inv\n+ sim:Deployment/prod/payments\x1b[32m\u202e.yaml:1:1: bad\nvalue`) {
		t.Fatalf("%q", got)
	}
}
