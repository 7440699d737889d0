package kubetest

import (
	"bufio"
	"bytes"
	"context"
	"embed"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// The CRDs every environment has.
//
//go:embed crds/*.yaml
var embeddedCRDs embed.FS

var crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// FieldManager is the field manager of the objects Apply creates.
const FieldManager = "kubetest"

// Apply creates every object of a multi-document YAML (or JSON) string, in
// order, and returns them as created. Namespaced objects must name their
// namespace. A CustomResourceDefinition is waited for until Established, so
// later documents (and later calls) may use its kind. Any error fails the
// test.
//
// The first create of a custom resource less than 2 s after its CRD became
// Established takes 2 s: kube-apiserver sleeps there on purpose (for HA
// servers that have not seen the CRD yet).
func (e *Env) Apply(t testing.TB, yaml string) []*unstructured.Unstructured {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
	defer cancel()
	objs, err := e.apply(ctx, []byte(yaml), FieldManager)
	if err != nil {
		t.Fatalf("kubetest.Apply: %v", err)
	}
	return objs
}

func (e *Env) apply(ctx context.Context, data []byte, manager string) ([]*unstructured.Unstructured, error) {
	docs, err := decodeYAML(data)
	if err != nil {
		return nil, err
	}
	dyn, _, mapper, err := e.clients()
	if err != nil {
		return nil, err
	}
	var out []*unstructured.Unstructured
	var pending []string // CRDs created, not yet seen Established
	for i, obj := range docs {
		gvk := obj.GroupVersionKind()
		what := fmt.Sprintf("document %d (%s %s)", i+1, gvk.Kind, obj.GetName())
		m, err := e.mapping(ctx, gvk, &pending)
		if err != nil {
			return out, fmt.Errorf("%s: %w", what, err)
		}
		ns := obj.GetNamespace()
		var created *unstructured.Unstructured
		opts := metav1.CreateOptions{FieldManager: manager}
		if m.Scope.Name() == meta.RESTScopeNameNamespace {
			if ns == "" {
				return out, fmt.Errorf("%s: %s is namespaced and the document has no metadata.namespace", what, gvk.Kind)
			}
			created, err = dyn.Resource(m.Resource).Namespace(ns).Create(ctx, obj, opts)
		} else {
			if ns != "" {
				return out, fmt.Errorf("%s: %s is cluster-scoped and the document has metadata.namespace %q", what, gvk.Kind, ns)
			}
			created, err = dyn.Resource(m.Resource).Create(ctx, obj, opts)
		}
		if err != nil {
			return out, fmt.Errorf("%s: %w", what, err)
		}
		out = append(out, created)
		if m.Resource == crdGVR {
			pending = append(pending, created.GetName())
		}
	}
	if len(pending) > 0 {
		if err := e.waitEstablished(ctx, pending); err != nil {
			return out, err
		}
		mapper.ResetWithContext(ctx)
	}
	return out, nil
}

// mapping maps gvk to its resource. A kind the cached discovery does not know
// may be one of the pending CRDs or one another test just added: it waits for
// the pending CRDs, refreshes discovery and tries again for up to 10 s.
func (e *Env) mapping(ctx context.Context, gvk schema.GroupVersionKind, pending *[]string) (*meta.RESTMapping, error) {
	_, _, mapper, err := e.clients()
	if err != nil {
		return nil, err
	}
	if gvk.Kind == "" || gvk.Version == "" {
		return nil, errors.New("no apiVersion or kind")
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		m, err := mapper.RESTMappingWithContext(ctx, gvk.GroupKind(), gvk.Version)
		if err == nil {
			return m, nil
		}
		if !meta.IsNoMatchError(err) || time.Now().After(deadline) {
			return nil, err
		}
		if len(*pending) > 0 {
			if err := e.waitEstablished(ctx, *pending); err != nil {
				return nil, err
			}
			*pending = nil
		}
		mapper.ResetWithContext(ctx)
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%w (%v)", err, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// waitEstablished polls each CRD until its Established condition is True.
func (e *Env) waitEstablished(ctx context.Context, names []string) error {
	dyn, _, _, err := e.clients()
	if err != nil {
		return err
	}
	for _, name := range names {
		last := "not seen yet"
		for {
			crd, err := dyn.Resource(crdGVR).Get(ctx, name, metav1.GetOptions{})
			if err == nil {
				established, why := crdConditions(crd)
				if established {
					break
				}
				if why != "" {
					return fmt.Errorf("CRD %s: %s", name, why)
				}
				last = "not Established yet"
			} else {
				last = err.Error()
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("CRD %s not Established: %s (%v)", name, last, ctx.Err())
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	return nil
}

// crdConditions reports whether a CRD is Established, or why it never will
// be (its names were refused).
func crdConditions(crd *unstructured.Unstructured) (established bool, refused string) {
	conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		switch m["type"] {
		case "Established":
			if m["status"] == "True" {
				established = true
			}
		case "NamesAccepted":
			if m["status"] == "False" {
				refused = fmt.Sprintf("names not accepted: %v", m["message"])
			}
		}
	}
	return established, refused
}

// decodeYAML splits a multi-document YAML or JSON stream into objects,
// skipping empty documents.
func decodeYAML(data []byte) ([]*unstructured.Unstructured, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var out []*unstructured.Unstructured
	for i := 1; ; i++ {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", i, err)
		}
		js, err := utilyaml.ToJSON(doc)
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", i, err)
		}
		if js = bytes.TrimSpace(js); len(js) == 0 || string(js) == "null" {
			continue
		}
		obj := &unstructured.Unstructured{}
		if err := obj.UnmarshalJSON(js); err != nil {
			return nil, fmt.Errorf("document %d: %w", i, err)
		}
		out = append(out, obj)
	}
}

// installCRDs creates the embedded CRDs and then the contents of every
// *.yaml file in dirs, and waits until all CRDs among them are Established.
func (e *Env) installCRDs(ctx context.Context, dirs []string) error {
	var all []byte
	add := func(name string, b []byte) {
		all = append(all, "\n---\n# "...)
		all = append(all, name...)
		all = append(all, '\n')
		all = append(all, b...)
	}
	embedded, err := fs.Glob(embeddedCRDs, "crds/*.yaml")
	if err != nil {
		return err
	}
	for _, f := range embedded {
		b, err := embeddedCRDs.ReadFile(f)
		if err != nil {
			return err
		}
		add(f, b)
	}
	for _, d := range dirs {
		files, err := filepath.Glob(filepath.Join(d, "*.yaml"))
		if err != nil {
			return err
		}
		sort.Strings(files)
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				return err
			}
			add(f, b)
		}
	}
	_, err = e.apply(ctx, all, FieldManager)
	return err
}
