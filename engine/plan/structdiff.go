package plan

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// A structured value (a route group's whole config) is one attribute to the
// engine but dozens of fields to a reader: the text plan shows what changed
// inside it, and a long one created whole in short. The JSON plan keeps the
// values whole.
const (
	maxShown      = 120 // a value longer than this is shortened
	maxFieldDiffs = 8   // fields listed in a changed object; the rest counted
	maxFieldValue = 60
)

// shortValue is v for a reader: a long JSON object as its field count.
func shortValue(v string) string {
	if len(v) <= maxShown {
		return v
	}
	var m map[string]any
	if json.Unmarshal([]byte(v), &m) != nil {
		return clip(v, maxShown)
	}
	return fmt.Sprintf("{…%d fields: %s}", len(m), clip(strings.Join(slices.Sorted(maps.Keys(m)), ", "), maxFieldValue))
}

// fieldDiff lists what changed between two JSON objects, leaf by leaf
// ("table: observe → enforce"); ok is false unless both are objects and
// one of them is long enough to need it.
func fieldDiff(from, to string) (string, bool) {
	if len(from) <= maxShown && len(to) <= maxShown {
		return "", false
	}
	var a, b map[string]any
	if json.Unmarshal([]byte(from), &a) != nil || json.Unmarshal([]byte(to), &b) != nil {
		return "", false
	}
	fa, fb := map[string]string{}, map[string]string{}
	flatten("", a, fa)
	flatten("", b, fb)
	keys := map[string]bool{}
	for k := range fa {
		keys[k] = true
	}
	for k := range fb {
		keys[k] = true
	}
	var diffs []string
	for _, k := range slices.Sorted(maps.Keys(keys)) {
		x, inA := fa[k]
		y, inB := fb[k]
		switch {
		case !inA:
			x = "unset"
		case !inB:
			y = "unset"
		case x == y:
			continue
		}
		diffs = append(diffs, fmt.Sprintf("%s: %s → %s", k, clip(x, maxFieldValue), clip(y, maxFieldValue)))
	}
	if len(diffs) == 0 {
		return "{no field changed}", true
	}
	more := ""
	if len(diffs) > maxFieldDiffs {
		more = fmt.Sprintf(", and %d more", len(diffs)-maxFieldDiffs)
		diffs = diffs[:maxFieldDiffs]
	}
	return "{" + strings.Join(diffs, ", ") + more + "}", true
}

// flatten maps each leaf of an object to its compact JSON, by dotted path;
// lists are leaves (a changed backend list reads as one field).
func flatten(prefix string, m map[string]any, out map[string]string) {
	for k, v := range m {
		p := k
		if prefix != "" {
			p = prefix + "." + k
		}
		if sub, ok := v.(map[string]any); ok && len(sub) > 0 {
			flatten(p, sub, out)
			continue
		}
		b, _ := json.Marshal(v)
		out[p] = string(b)
	}
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}
