// Package spec holds the Go types of every spec kind, kept in step with the
// CUE schemas in cue/schema by a test, and the scalar types (quantities,
// durations, percentages) that the schemas accept as strings.
package spec

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
)

// APIVersion is the only apiVersion this release reads.
const APIVersion = "setpoint.dev/v1alpha1"

// Pos is a position in a user's file, 1-based.
type Pos struct {
	File string `json:"file"`
	Line int    `json:"line"`
	Col  int    `json:"column"`
}

func (p Pos) String() string {
	if p.Line == 0 {
		return p.File
	}
	return fmt.Sprintf("%s:%d:%d", p.File, p.Line, p.Col)
}

// Source records where a document came from and where each of its fields
// sits, so later stages (diff, plan, apply failures) can point at the line a
// user wrote long after the CUE value is gone.
type Source struct {
	Pos    Pos
	fields []FieldPos
}

// FieldPos is the position of one field of a document. Positions are kept
// compact (10,000 documents of twenty fields each): the file is the
// document's, and loaders intern the paths.
type FieldPos struct {
	Path      string // dotted, list elements numbered from 0
	Line, Col int32
}

// NewSource returns a Source; fields must be sorted by Path.
func NewSource(pos Pos, fields []FieldPos) Source {
	return Source{Pos: pos, fields: fields}
}

// PosOf returns the position of the dotted field path, or of its nearest
// ancestor that the user wrote, or of the document.
func (s Source) PosOf(path string) Pos {
	for path != "" {
		i := sort.Search(len(s.fields), func(i int) bool { return s.fields[i].Path >= path })
		if i < len(s.fields) && s.fields[i].Path == path {
			return Pos{File: s.Pos.File, Line: int(s.fields[i].Line), Col: int(s.fields[i].Col)}
		}
		j := strings.LastIndexByte(path, '.')
		if j < 0 {
			break
		}
		path = path[:j]
	}
	return s.Pos
}

// Metadata names a spec, as Kubernetes objects are named.
type Metadata struct {
	Name        string            `json:"name"`
	Namespace   string            `json:"namespace"`
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// Header is the part every document shares.
type Header struct {
	APIVersion string   `json:"apiVersion"`
	Kind       string   `json:"kind"`
	Metadata   Metadata `json:"metadata"`
	Src        Source   `json:"-"`
}

// Document is one decoded spec of any kind.
type Document interface {
	Head() *Header
}

// Head returns the shared header; embedding Header makes a kind a Document.
func (h *Header) Head() *Header { return h }

// ID is the kind/namespace/name that names a document uniquely.
func (h *Header) ID() string {
	return h.Kind + "/" + h.Metadata.Namespace + "/" + h.Metadata.Name
}

// Targeter is implemented by kinds that act on one workload; two specs of one
// kind on one target are a validation error.
type Targeter interface {
	Document
	// TargetKey identifies the target within the document's kind, with
	// the provider defaulted (the Environment's first).
	TargetKey(defaultProvider string) string
}

// Digest is the SHA-256 of a document's JSON encoding: equal for equal
// values however they were written. Saved plans record it per spec.
func Digest(d Document) string {
	b, err := json.Marshal(d)
	if err != nil {
		// Every kind's types encode; a failure is a programming error.
		panic(fmt.Sprintf("spec: encoding %s: %v", d.Head().ID(), err))
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// Kind describes one registered spec kind.
type Kind struct {
	Name string
	// New returns a zero document of this kind to decode into.
	New func() Document
}

var kinds = map[string]Kind{}

// Register adds a kind; each kind's file calls it from init.
func Register(k Kind) {
	if _, dup := kinds[k.Name]; dup {
		panic("spec: kind registered twice: " + k.Name)
	}
	kinds[k.Name] = k
}

// Lookup returns the registered kind of that name.
func Lookup(name string) (Kind, bool) {
	k, ok := kinds[name]
	return k, ok
}

// Kinds returns the registered kind names, sorted.
func Kinds() []string {
	return slices.Sorted(maps.Keys(kinds))
}

// FieldError is a rule a kind checks in Go after decoding, where CUE would
// be too slow or cannot express it (comparing quantities).
type FieldError struct {
	Path     string // dotted field path
	Message  string
	Expected string
	// Related is the dotted path of an earlier field the error refers to
	// (the first of two duplicates); the loader adds where it is, which
	// only it knows.
	Related string
}

// Checker is implemented by kinds with Go-side rules.
type Checker interface {
	Check() []FieldError
}

// quantityOrder checks lo ≤ hi for two quantities of one document.
func quantityOrder(hiPath string, lo, hi Bytes) []FieldError {
	if hi >= lo {
		return nil
	}
	return []FieldError{{Path: hiPath, Message: hi.String() + " is out of range", Expected: ">= " + lo.String()}}
}

// ProviderOr is a spec's provider: the one it names, or the default (the
// Environment's first).
func ProviderOr(named, def string) string {
	if named != "" {
		return named
	}
	return def
}
