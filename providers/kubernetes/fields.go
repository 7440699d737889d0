package kubernetes

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
	"sigs.k8s.io/structured-merge-diff/v6/value"

	"github.com/setpoint-dev/setpoint/engine/addrs"
)

// An object here is its unstructured JSON form: maps, lists, strings,
// int64, float64, bool. setpoint's attribute paths map one to one onto
// the API server's field paths: a field is a map key, a [name=x] selector
// the element of a list keyed by name (containers), a ["k"] key a map key
// (annotations).

// fieldPath is the API server's path for an attribute path (what
// managedFields and conflict causes speak of).
func fieldPath(p addrs.Path) (fieldpath.Path, error) {
	steps := p.Steps()
	out := make(fieldpath.Path, 0, len(steps))
	for _, s := range steps {
		switch s.Kind {
		case addrs.Field, addrs.MapKey:
			name := s.Name
			out = append(out, fieldpath.PathElement{FieldName: &name})
		case addrs.Selector:
			out = append(out, fieldpath.PathElement{Key: &value.FieldList{{Name: s.Name, Value: value.NewValueInterface(s.Value)}}})
		default:
			return nil, fmt.Errorf("%s: an index names no field of an API object", p)
		}
	}
	return out, nil
}

// get returns the value at p in obj.
func get(obj map[string]any, p addrs.Path) (any, bool) {
	var cur any = obj
	for _, s := range p.Steps() {
		switch s.Kind {
		case addrs.Field, addrs.MapKey:
			m, ok := cur.(map[string]any)
			if !ok {
				return nil, false
			}
			if cur, ok = m[s.Name]; !ok {
				return nil, false
			}
		case addrs.Selector:
			l, ok := cur.([]any)
			if !ok {
				return nil, false
			}
			i := findKeyed(l, map[string]any{s.Name: s.Value})
			if i < 0 {
				return nil, false
			}
			cur = l[i]
		default:
			return nil, false
		}
	}
	return cur, true
}

// set writes v at p in obj, making the maps and keyed list elements on
// the way.
func set(obj map[string]any, p addrs.Path, v any) error {
	steps := p.Steps()
	var parent any = obj
	for i, s := range steps {
		last := i == len(steps)-1
		switch s.Kind {
		case addrs.Field, addrs.MapKey:
			m, ok := parent.(map[string]any)
			if !ok {
				return fmt.Errorf("%s: %s is not an object", p, addrs.FromSteps(steps[:i]...))
			}
			if last {
				m[s.Name] = v
				return nil
			}
			next, ok := m[s.Name]
			if !ok {
				if steps[i+1].Kind == addrs.Selector {
					next = []any{}
				} else {
					next = map[string]any{}
				}
				m[s.Name] = next
			}
			if steps[i+1].Kind == addrs.Selector {
				l, ok := next.([]any)
				if !ok {
					return fmt.Errorf("%s: %s is not a list", p, addrs.FromSteps(steps[:i+1]...))
				}
				key := map[string]any{steps[i+1].Name: steps[i+1].Value}
				j := findKeyed(l, key)
				if j < 0 {
					l = append(l, maps.Clone(key))
					m[s.Name] = l
					j = len(l) - 1
				}
				parent = l[j]
				continue
			}
			parent = next
		case addrs.Selector:
			if last {
				return fmt.Errorf("%s: a path ends in a field, not a list element", p)
			}
			// parent was moved to the element by the field before it.
		default:
			return fmt.Errorf("%s: an index names no field of an API object", p)
		}
	}
	return nil
}

// remove deletes the value at p from obj and prunes what it leaves empty:
// maps with no field, list elements with nothing but their key.
func remove(obj map[string]any, p addrs.Path) {
	removeAt(obj, p.Steps())
}

func removeAt(m map[string]any, steps []addrs.Step) {
	if len(steps) == 0 {
		return
	}
	s := steps[0]
	if len(steps) == 1 {
		delete(m, s.Name)
		return
	}
	next := m[s.Name]
	if steps[1].Kind == addrs.Selector {
		l, ok := next.([]any)
		if !ok {
			return
		}
		key := map[string]any{steps[1].Name: steps[1].Value}
		j := findKeyed(l, key)
		if j < 0 {
			return
		}
		el, ok := l[j].(map[string]any)
		if !ok {
			return
		}
		removeAt(el, steps[2:])
		if onlyKeys(el, key) {
			l = slices.Delete(l, j, j+1)
		}
		if len(l) == 0 {
			delete(m, s.Name)
		} else {
			m[s.Name] = l
		}
		return
	}
	child, ok := next.(map[string]any)
	if !ok {
		return
	}
	removeAt(child, steps[1:])
	if len(child) == 0 {
		delete(m, s.Name)
	}
}

func onlyKeys(el, key map[string]any) bool {
	for k := range el {
		if _, ok := key[k]; !ok {
			return false
		}
	}
	return true
}

// findKeyed is the index of the list element whose fields include key.
func findKeyed(l []any, key map[string]any) int {
	for i, e := range l {
		m, ok := e.(map[string]any)
		if !ok {
			continue
		}
		match := true
		for k, v := range key {
			if fmt.Sprint(m[k]) != fmt.Sprint(v) {
				match = false
				break
			}
		}
		if match {
			return i
		}
	}
	return -1
}

// managedSets parses an object's managedFields: for each entry, its
// manager and the fields it owns. Entries of a subresource count: an HPA
// writes replicas through /scale, and owns them as much as an applier.
type managed struct {
	manager     string
	operation   metav1.ManagedFieldsOperationType
	subresource string
	fields      *fieldpath.Set
}

func managedSets(entries []metav1.ManagedFieldsEntry) []managed {
	var out []managed
	for _, e := range entries {
		if e.FieldsV1 == nil {
			continue
		}
		s := &fieldpath.Set{}
		if err := s.FromJSON(e.FieldsV1.GetRawReader()); err != nil {
			continue // a malformed entry owns nothing we can name
		}
		out = append(out, managed{manager: e.Manager, operation: e.Operation, subresource: e.Subresource, fields: s})
	}
	return out
}

// managerOf names who owns the field at fp: another manager before self
// when several share it, since that is whom an apply would conflict with.
// With under, owning any field below fp counts (a structured value's
// manager owns its leaves, not the object itself).
func managerOf(ms []managed, fp fieldpath.Path, self string, under ...bool) string {
	owner := ""
	for _, m := range ms {
		if !m.fields.Has(fp) && !(len(under) > 0 && under[0] && hasUnder(m.fields, fp)) {
			continue
		}
		if m.manager != self {
			return m.manager
		}
		owner = m.manager
	}
	return owner
}

// ownedBy is the set of fields manager applied (operation Apply) on the
// main resource.
func ownedBy(ms []managed, manager string) *fieldpath.Set {
	for _, m := range ms {
		if m.manager == manager && m.operation == metav1.ManagedFieldsOperationApply && m.subresource == "" {
			return m.fields
		}
	}
	return &fieldpath.Set{}
}

// extract copies from live into dst every leaf field of owned: what the
// manager applied before, so an apply that re-sends it drops nothing.
func extract(dst, live map[string]any, owned *fieldpath.Set) error {
	var err error
	owned.Leaves().Iterate(func(p fieldpath.Path) {
		if err == nil {
			err = copyPath(dst, live, p)
		}
	})
	return err
}

func copyPath(dst, src map[string]any, p fieldpath.Path) error {
	var d, s any = dst, src
	for i, pe := range p {
		last := i == len(p)-1
		switch {
		case pe.FieldName != nil:
			sm, ok := s.(map[string]any)
			if !ok {
				return nil // gone from the live object
			}
			sv, ok := sm[*pe.FieldName]
			if !ok {
				return nil
			}
			dm := d.(map[string]any)
			if last {
				dm[*pe.FieldName] = runtime.DeepCopyJSONValue(sv)
				return nil
			}
			dv, ok := dm[*pe.FieldName]
			if !ok {
				switch sv.(type) {
				case map[string]any:
					dv = map[string]any{}
				case []any:
					dv = []any{}
				default:
					dm[*pe.FieldName] = runtime.DeepCopyJSONValue(sv)
					return nil
				}
				dm[*pe.FieldName] = dv
			}
			if pe2 := p[i+1]; pe2.Key != nil || pe2.Value != nil {
				// Lists are handled by the next element with the map
				// that holds them, so it can append.
				sl, ok := sv.([]any)
				if !ok {
					return nil
				}
				dl, ok := dv.([]any)
				if !ok {
					return fmt.Errorf("%s: not a list", p)
				}
				var si int
				var template any
				if pe2.Key != nil {
					key := map[string]any{}
					for _, f := range *pe2.Key {
						key[f.Name] = f.Value.Unstructured()
					}
					if si = findKeyed(sl, key); si < 0 {
						return nil
					}
					template = key
				} else {
					want := (*pe2.Value).Unstructured()
					si = slices.IndexFunc(sl, func(e any) bool { return fmt.Sprint(e) == fmt.Sprint(want) })
					if si < 0 {
						return nil
					}
					template = nil
				}
				if i+1 == len(p)-1 {
					// The element itself is the leaf.
					if pe2.Value != nil {
						if !slices.ContainsFunc(dl, func(e any) bool { return fmt.Sprint(e) == fmt.Sprint(sl[si]) }) {
							dl = append(dl, runtime.DeepCopyJSONValue(sl[si]))
						}
					} else if findKeyed(dl, template.(map[string]any)) < 0 {
						dl = append(dl, maps.Clone(template.(map[string]any)))
					}
					dm[*pe.FieldName] = dl
					return nil
				}
				if pe2.Value != nil {
					return nil // a set element has no fields below it
				}
				key := template.(map[string]any)
				di := findKeyed(dl, key)
				if di < 0 {
					dl = append(dl, maps.Clone(key))
					dm[*pe.FieldName] = dl
					di = len(dl) - 1
				}
				return copyPath(dl[di].(map[string]any), sl[si].(map[string]any), p[i+2:])
			}
			d, s = dv, sv
		default:
			// An index (an atomic list's element) is never a leaf of its
			// own in managedFields; nothing to copy separately.
			return nil
		}
	}
	return nil
}

// attrPathOf reads the server's text of a field path (".spec.replicas",
// `.spec.template.spec.containers[name="app"].resources.requests.memory`,
// ".metadata.annotations.a.b/c") back into setpoint's path. The text is
// ambiguous where a map key holds dots; keys of annotations and labels are
// taken whole.
func attrPathOf(field string) addrs.Path {
	rest := strings.TrimPrefix(field, ".")
	var steps []addrs.Step
	for rest != "" {
		if len(steps) > 0 {
			if last := steps[len(steps)-1]; last.Kind == addrs.Field && (last.Name == "annotations" || last.Name == "labels") {
				steps = append(steps, addrs.K(rest))
				break
			}
		}
		i := strings.IndexAny(rest, ".[")
		if i < 0 {
			steps = append(steps, addrs.F(rest))
			break
		}
		if i > 0 {
			steps = append(steps, addrs.F(rest[:i]))
		}
		rest = rest[i:]
		if rest[0] == '.' {
			rest = rest[1:]
			continue
		}
		end := strings.IndexByte(rest, ']')
		if end < 0 {
			return addrs.Path{}
		}
		sel := rest[1:end]
		rest = rest[end+1:]
		k, v, ok := strings.Cut(sel, "=")
		if !ok {
			return addrs.Path{}
		}
		if uq, err := strconv.Unquote(v); err == nil {
			v = uq
		}
		steps = append(steps, addrs.Sel(k, v))
		rest = strings.TrimPrefix(rest, ".")
	}
	if len(steps) == 0 {
		return addrs.Path{}
	}
	p := addrs.FromSteps(steps...)
	if len(p.String()) > addrs.MaxPathLen {
		return addrs.Path{}
	}
	return p
}

// hasUnder reports whether set holds a field below fp.
func hasUnder(set *fieldpath.Set, fp fieldpath.Path) bool {
	for _, pe := range fp {
		set = set.WithPrefix(pe)
	}
	return !set.Empty()
}
