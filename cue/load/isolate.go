package load

import (
	"context"
	"fmt"
	"strings"

	"github.com/setpoint-dev/setpoint/cue/spec"
)

// CUEEvaluator loads .cue spec files somewhere other than this process.
// CUE's evaluator cannot be stopped once it runs, and a 200-byte file can
// ask it for gigabytes and minutes, so a caller that reads untrusted specs
// evaluates them where they can be bounded and killed (package
// cue/isolate: a child process). YAML never goes there: its expansion is
// bounded by the decoder, and the 10,000-document goal is for YAML.
type CUEEvaluator interface {
	// EvalCUE loads each file as LoadFile would, with opts, and returns
	// the result of every file, keyed by its path as given. A file is
	// left out only when ctx ended before it was evaluated; any other
	// failure (a breached bound, a crash) is a diagnostic of its file.
	EvalCUE(ctx context.Context, opts Options, files []string) map[string]FileResult
}

// Options are the settings of a Loader that a file loaded elsewhere must
// be loaded with, so that both places give the same answer.
type Options struct {
	MaxFileSize int64 `json:"maxFileSize"`
	NoFastPath  bool  `json:"noFastPath,omitempty"`
	SchemaOnly  bool  `json:"schemaOnly,omitempty"`
}

// Options returns the loader's settings.
func (l *Loader) Options() Options {
	return Options{MaxFileSize: l.MaxFileSize, NoFastPath: l.NoFastPath, SchemaOnly: l.SchemaOnly}
}

// SetOptions applies settings taken from another loader.
func (l *Loader) SetOptions(o Options) {
	l.MaxFileSize, l.NoFastPath, l.SchemaOnly = o.MaxFileSize, o.NoFastPath, o.SchemaOnly
}

// FileResult is what loading one file produced.
type FileResult struct {
	Documents []spec.Document
	Diags     Diagnostics
}

// EmittedJSON returns the JSON that the document being passed to emit was
// decoded from; it is valid only during that call to emit. A document sent
// to another process as this JSON decodes there into a value equal to the
// one emitted (re-encoding the document would not: empty maps under
// omitempty come back nil).
func (l *Loader) EmittedJSON() []byte { return l.emitted }

func isCUE(path string) bool { return strings.HasSuffix(path, ".cue") }

// context is the loader's context, never nil.
func (l *Loader) context() context.Context {
	if l.Ctx == nil {
		return context.Background()
	}
	return l.Ctx
}

// evalOne sends one .cue file to the evaluator (LoadFile called alone, as
// watch does after an edit).
func (l *Loader) evalOne(path string, emit func(spec.Document)) Diagnostics {
	fr, ok := l.CUE.EvalCUE(l.context(), l.Options(), []string{path})[path]
	if !ok {
		return Diagnostics{interrupted(path, 0)}
	}
	for _, d := range fr.Documents {
		emit(d)
	}
	return fr.Diags
}

// cueBatch is the evaluation of every .cue file of one Load, running while
// the YAML files are loaded here.
type cueBatch struct {
	done chan struct{}
	res  map[string]FileResult
}

// startCUE starts evaluating the .cue files among files, or returns nil
// when there is no evaluator or nothing for it.
func (l *Loader) startCUE(files []string) *cueBatch {
	if l.CUE == nil {
		return nil
	}
	var cue []string
	for _, f := range files {
		if isCUE(f) {
			cue = append(cue, f)
		}
	}
	if len(cue) == 0 {
		return nil
	}
	b := &cueBatch{done: make(chan struct{})}
	ctx, opts := l.context(), l.Options()
	go func() {
		defer close(b.done)
		b.res = l.CUE.EvalCUE(ctx, opts, cue)
	}()
	return b
}

// wait returns once the evaluator is done (its child process reaped).
func (b *cueBatch) wait() {
	if b != nil {
		<-b.done
	}
}

// loadOne loads one file of a Load: a .cue file's result comes from the
// batch, anything else is loaded here. It reports false when the loader's
// context ended before the file was loaded.
func (l *Loader) loadOne(path string, batch *cueBatch) (FileResult, bool) {
	if batch != nil && isCUE(path) {
		batch.wait()
		fr, ok := batch.res[path]
		return fr, ok
	}
	if l.context().Err() != nil {
		return FileResult{}, false
	}
	var fr FileResult
	fr.Diags = l.LoadFile(path, func(d spec.Document) { fr.Documents = append(fr.Documents, d) })
	return fr, true
}

// interrupted is the one diagnostic of a Load stopped by its context: the
// file it stopped at, and how many more were left unchecked.
func interrupted(path string, after int) Diagnostic {
	msg := "interrupted before this file was checked"
	switch {
	case after == 1:
		msg += "; 1 more file was not checked either"
	case after > 1:
		msg += fmt.Sprintf("; %d more files were not checked either", after)
	}
	return Diagnostic{Pos: spec.Pos{File: path}, Message: msg}
}
