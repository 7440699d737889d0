package main

import (
	"fmt"
	"path/filepath"
	"reflect"
	"strings"

	"github.com/setpoint-dev/setpoint/cue/load"
	"github.com/setpoint-dev/setpoint/cue/spec"
	"github.com/setpoint-dev/setpoint/engine/diag"
	"github.com/setpoint-dev/setpoint/engine/plan"
)

// A pull request's specs are untrusted: its Environment names the
// Prometheus server the operator's credentials go to, the scrape targets
// fetched, the providers run and the state read. With a trusted
// Environment (the base branch's), all of that comes from it and the pull
// request's own Environment is ignored (and said to be, when it differs).

// withTrustedEnv replaces the Environment of docs by the one in the file
// at path. Paths the trusted Environment names resolve in its own tree.
// The note says what was replaced, for the plan.
func withTrustedEnv(l *load.Loader, dir, path string, docs []spec.Document) ([]spec.Document, *plan.Note, error) {
	// A file inside the directory planned is the change's to write (a
	// checkout of the base branch's file into it is overwritten by the
	// change, and the state it names would be the change's).
	if inside, err := within(dir, path); err != nil {
		return nil, nil, err
	} else if inside {
		return nil, nil, fmt.Errorf("the trusted Environment %q is inside the directory planned %q: check the base branch out beside it (see examples/ci)", path, dir)
	}
	r := l.Load(path)
	if len(r.Diags) > 0 {
		msgs := make([]string, len(r.Diags))
		for i, d := range r.Diags {
			msgs[i] = d.Error()
		}
		return nil, nil, fmt.Errorf("the trusted Environment %q does not load:\n%s", path, strings.Join(msgs, "\n"))
	}
	var trusted *spec.Environment
	for _, d := range r.Documents {
		if e, ok := d.(*spec.Environment); ok {
			if trusted != nil {
				return nil, nil, fmt.Errorf("the trusted Environment file %q holds more than one Environment", path)
			}
			trusted = e
		}
	}
	if trusted == nil {
		return nil, nil, fmt.Errorf("the trusted Environment file %q holds no Environment", path)
	}
	var own *spec.Environment
	out := make([]spec.Document, 0, len(docs)+1)
	out = append(out, trusted)
	for _, d := range docs {
		if e, ok := d.(*spec.Environment); ok {
			if own == nil {
				own = e
			}
			continue
		}
		out = append(out, d)
	}
	var note *plan.Note
	switch {
	case own == nil:
		note = &plan.Note{Severity: diag.Warning, Message: fmt.Sprintf("the directory has no valid Environment of its own: planned against the trusted Environment %q", path)}
	case !reflect.DeepEqual(own.Metadata, trusted.Metadata) || !reflect.DeepEqual(own.Spec, trusted.Spec):
		note = &plan.Note{Severity: diag.Warning, Pos: own.Src.Pos,
			Message: fmt.Sprintf("this change edits the Environment: planned against the trusted Environment %q instead (endpoints, credentials, providers, scraping and state come from it, never from the change)", path)}
	}
	return out, note, nil
}

// within says whether path (every symlink resolved) is dir or below it.
func within(dir, path string) (bool, error) {
	d, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return false, fmt.Errorf("resolving %q: %w", dir, err)
	}
	p, err := filepath.EvalSymlinks(path)
	if err != nil {
		return false, fmt.Errorf("the trusted Environment %q: %w", path, err)
	}
	rel, err := filepath.Rel(d, p)
	if err != nil {
		return false, nil
	}
	return rel == "." || (rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))), nil
}
