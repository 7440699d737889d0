// Package watch keeps a spec directory reconciled on the wall clock: file
// events (debounced) reconcile the specs an edit touched, and a periodic
// tick reconciles them all. A broken edit is reported and the last good
// version of that file keeps running.
package watch

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/setpoint-dev/setpoint/cue/load"
	"github.com/setpoint-dev/setpoint/cue/spec"
)

// Set is the specs in force: the last good documents of every file.
type Set struct {
	Env   *spec.Environment
	Specs []spec.Document // every kind but the Environment
}

// Reconciler is called with the whole set and, for an edit, the specs of
// the files it touched (nil on a periodic tick: reconcile everything).
type Reconciler func(ctx context.Context, set Set, touched []spec.Document, reason string)

// Watcher watches one directory.
type Watcher struct {
	Dir       string
	Loader    *load.Loader
	Tick      time.Duration
	Debounce  time.Duration
	Reconcile Reconciler
	Log       *slog.Logger
	// Triggers carries reasons to reconcile everything now: provider
	// events (a world change), debounced like edits.
	Triggers <-chan string
	// files holds the last good documents of each file.
	files map[string][]spec.Document
}

// Load reads every file once, before watching: the first reconcile.
func (w *Watcher) Load() load.Diagnostics {
	w.files = map[string][]spec.Document{}
	r := w.Loader.LoadDir(w.Dir)
	for _, d := range r.Documents {
		f := d.Head().Src.Pos.File
		w.files[f] = append(w.files[f], d)
	}
	return r.Diags
}

// Set returns the specs in force.
func (w *Watcher) Set() Set {
	var s Set
	for _, f := range slices.Sorted(maps.Keys(w.files)) {
		for _, d := range w.files[f] {
			switch x := d.(type) {
			case *spec.Environment:
				if s.Env == nil {
					s.Env = x
				}
			default:
				s.Specs = append(s.Specs, x)
			}
		}
	}
	return s
}

// reload re-reads one file. A broken file keeps its last good documents;
// a removed file drops them. It returns the file's specs now in force.
func (w *Watcher) reload(path string) ([]spec.Document, error) {
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		delete(w.files, path)
		return nil, nil
	}
	var docs []spec.Document
	diags := w.Loader.LoadFile(path, func(d spec.Document) { docs = append(docs, d) })
	if len(diags) > 0 {
		return nil, diags
	}
	// The rules that span files still hold across the new set.
	old := w.files[path]
	w.files[path] = docs
	var all []spec.Document
	for _, ds := range w.files {
		all = append(all, ds...)
	}
	if cd := load.CrossCheck(all, true); len(cd) > 0 {
		w.files[path] = old
		return nil, cd
	}
	var out []spec.Document
	for _, d := range docs {
		if d.Head().Kind != "Environment" {
			out = append(out, d)
		}
	}
	return out, nil
}

func isSpec(name string) bool {
	base := filepath.Base(name)
	if strings.HasPrefix(base, ".") {
		return false
	}
	switch filepath.Ext(name) {
	case ".yaml", ".yml", ".cue":
		return true
	}
	return false
}

// Run watches until ctx ends. It reconciles everything at once, then on
// every tick, and the touched specs after each debounced edit.
func (w *Watcher) Run(ctx context.Context) error {
	if w.files == nil {
		for _, d := range w.Load() {
			w.Log.Error("invalid spec", "error", d.Error())
		}
	}
	fw, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("watching %s: %w", w.Dir, err)
	}
	defer fw.Close()
	err = filepath.WalkDir(w.Dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p != w.Dir && strings.HasPrefix(d.Name(), ".") {
				return filepath.SkipDir
			}
			return fw.Add(p)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("watching %s: %w", w.Dir, err)
	}
	w.Reconcile(ctx, w.Set(), nil, "start")
	tick := time.NewTicker(w.Tick)
	defer tick.Stop()
	pending := map[string]bool{}
	var debounce <-chan time.Time
	var triggered []string
	var triggerDebounce <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
			w.Reconcile(ctx, w.Set(), nil, "tick")
		case why := <-w.Triggers:
			triggered = append(triggered, why)
			triggerDebounce = time.After(w.Debounce)
		case <-triggerDebounce:
			triggerDebounce = nil
			w.Reconcile(ctx, w.Set(), nil, strings.Join(compact(triggered), "; "))
			triggered = triggered[:0]
		case ev, ok := <-fw.Events:
			if !ok {
				return nil
			}
			if !isSpec(ev.Name) || ev.Op == fsnotify.Chmod {
				continue
			}
			pending[ev.Name] = true
			debounce = time.After(w.Debounce)
		case err, ok := <-fw.Errors:
			if !ok {
				return nil
			}
			w.Log.Error("watch", "error", err)
		case <-debounce:
			debounce = nil
			var touched []spec.Document
			var names []string
			for f := range pending {
				names = append(names, filepath.Base(f))
				docs, err := w.reload(f)
				if err != nil {
					w.Log.Error("edit rejected; the last good version keeps running", "file", f, "error", err)
					continue
				}
				touched = append(touched, docs...)
			}
			clear(pending)
			if len(touched) > 0 {
				sort.Strings(names)
				w.Reconcile(ctx, w.Set(), touched, "edit of "+strings.Join(names, ", "))
			}
		}
	}
}

func compact(s []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, x := range s {
		if !seen[x] {
			seen[x] = true
			out = append(out, x)
		}
	}
	return out
}
