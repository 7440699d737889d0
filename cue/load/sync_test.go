package load

import (
	"encoding/json"
	"reflect"
	"sort"
	"strings"
	"testing"

	"cuelang.org/go/cue"

	"github.com/setpoint-dev/setpoint/cue/spec"
)

// TestGoTypesMatchSchemas keeps the Go types and the CUE schemas in step:
// every schema field has a Go field with the same JSON name and every Go
// field has a schema field, recursively.
func TestGoTypesMatchSchemas(t *testing.T) {
	l := newLoader(t)
	for _, k := range spec.Kinds() {
		kind, _ := spec.Lookup(k)
		compareType(t, k, l.defs[k], reflect.TypeOf(kind.New()).Elem())
	}
	// Provider configs are raw JSON in Go (each provider decodes its own);
	// their schemas are checked against their types here.
	for def, typ := range map[string]reflect.Type{
		"#SimConfig":        reflect.TypeOf(spec.SimConfig{}),
		"#KubernetesConfig": reflect.TypeOf(spec.KubernetesConfig{}),
	} {
		compareType(t, def, l.schema.LookupPath(cue.ParsePath(def)), typ)
	}
}

var leafTypes = map[reflect.Type]bool{
	reflect.TypeOf(json.RawMessage{}): true,
}

// isLeaf reports whether a Go type is decoded whole (a quantity read from
// a string). A struct with its own UnmarshalJSON still decodes field by
// field (it only fills in defaults), so its fields are compared.
func isLeaf(t reflect.Type) bool {
	if leafTypes[t] {
		return true
	}
	return t.Kind() != reflect.Struct && reflect.PointerTo(t).Implements(reflect.TypeOf((*json.Unmarshaler)(nil)).Elem())
}

func jsonFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if f.Anonymous {
			for k, v := range jsonFields(f.Type) {
				out[k] = v
			}
			continue
		}
		tag := f.Tag.Get("json")
		if tag == "-" || !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if name == "" {
			name = f.Name
		}
		out[name] = f.Type
	}
	return out
}

func compareType(t *testing.T, where string, v cue.Value, typ reflect.Type) {
	t.Helper()
	if !v.Exists() {
		t.Errorf("%s: no schema", where)
		return
	}
	goFields := jsonFields(typ)
	cueFields := map[string]cue.Value{}
	it, err := v.Fields(cue.Optional(true))
	if err != nil {
		t.Errorf("%s: %v", where, err)
		return
	}
	for it.Next() {
		cueFields[it.Selector().Unquoted()] = it.Value()
	}
	// Fields a comprehension adds (a provider's config, chosen by its name)
	// are not listed by the schema until the name is known.
	if typ == reflect.TypeOf(spec.Provider{}) {
		cueFields["config"] = cue.Value{}
	}
	var names []string
	for n := range goFields {
		names = append(names, n)
	}
	for n := range cueFields {
		if _, ok := goFields[n]; !ok {
			t.Errorf("%s.%s: in the schema, not in Go type %s", where, n, typ)
		}
	}
	sort.Strings(names)
	for _, n := range names {
		cv, ok := cueFields[n]
		if !ok {
			t.Errorf("%s.%s: in Go type %s, not in the schema", where, n, typ)
			continue
		}
		ft := goFields[n]
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if isLeaf(ft) || !cv.Exists() {
			continue
		}
		switch ft.Kind() {
		case reflect.Struct:
			compareType(t, where+"."+n, cv, ft)
		case reflect.Slice:
			if et := ft.Elem(); et.Kind() == reflect.Struct && !isLeaf(et) {
				compareType(t, where+"."+n+"[]", cv.LookupPath(cue.MakePath(cue.AnyIndex)), et)
			}
		}
	}
}
