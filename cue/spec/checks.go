package spec

import (
	"cmp"
	"slices"
	"sync"
)

// A Check is a rule `setpoint validate` enforces in Go, beyond the CUE
// schemas: `cue vet` and the JSON Schemas in schemas/ do not make it. Each
// is registered where it is defined, so the reference docs list them all
// (hack/refdocs writes docs/kinds/checks.md), and a test runs every
// check's example through validate to show it fires at its path.
type Check struct {
	// Kind is the kind of the documents checked; "" for the directory or
	// the files themselves.
	Kind string
	// Path is the field the error names ("*" for a list index); an error
	// at Path or below it is this check's. "" for an error at a document
	// or a file.
	Path string
	// What the check wants, in one line.
	What string
	// Why is why CUE does not check it (one of the Why constants).
	Why string
	// Example is a file under testdata/ that breaks the check; empty only
	// for checks of the file system, which their own tests exercise.
	Example string
}

// Why a check is validate's and not the schema's.
const (
	WhySpans    = "spans documents"
	WhyQuantity = "quantity arithmetic in CUE costs ~2 ms a value (50 s and 4 GB for a 10,000-workload sim Environment)"
	WhyPromQL   = "PromQL is parsed in Go, with the bounds setpoint evaluates under"
	WhyParse    = "the value is parsed in Go as the decisions parse it"
	WhyCompare  = "compares fields as the decisions use them"
	WhyFiles    = "reads the file system"
	WhySyntax   = "YAML syntax, before the schema sees a value"
)

var (
	checksMu sync.Mutex
	checks   []Check
)

// RegisterCheck records a check for the reference docs; call it beside
// the code that makes the check, as a package-level var.
func RegisterCheck(c Check) Check {
	checksMu.Lock()
	defer checksMu.Unlock()
	checks = append(checks, c)
	return c
}

// Checks lists every registered check, by kind (the directory's first),
// then path.
func Checks() []Check {
	checksMu.Lock()
	defer checksMu.Unlock()
	out := slices.Clone(checks)
	slices.SortStableFunc(out, func(a, b Check) int {
		return cmp.Or(cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Path, b.Path))
	})
	return out
}
