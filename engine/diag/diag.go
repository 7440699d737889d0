// Package diag is setpoint's one diagnostics type, shared by the loader,
// the engine and providers, as Terraform's tfdiags is: a severity, where
// (a position in a spec file, a field path, a spec, an object), what went
// wrong and what was expected. Diagnostics are values carried in
// responses, not errors that end a call.
package diag

import (
	"encoding/json"
	"sort"
	"strings"

	"github.com/setpoint-dev/setpoint/cue/spec"
	"github.com/setpoint-dev/setpoint/engine/addrs"
)

// Severity of a diagnostic. The zero value is Error, so a diagnostic
// nobody classified is never taken for a warning.
type Severity uint8

// Severities.
const (
	Error Severity = iota
	Warning
	// Info explains a decision that changes nothing (a Schedule awake and
	// why): plans show it, nothing fails on it.
	Info
)

func (s Severity) String() string {
	switch s {
	case Warning:
		return "warning"
	case Info:
		return "info"
	}
	return "error"
}

// MarshalText prints the severity.
func (s Severity) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText reads a severity.
func (s *Severity) UnmarshalText(b []byte) error {
	switch string(b) {
	case "warning":
		*s = Warning
	case "info":
		*s = Info
	default:
		*s = Error
	}
	return nil
}

// Diagnostic is one problem.
type Diagnostic struct {
	Severity Severity
	// Pos is the position in a spec file the problem belongs to.
	Pos spec.Pos
	// Path is the field path within the document.
	Path string
	// Message says what is wrong; Expected what would be right.
	Message  string
	Expected string
	// Detail adds what a provider or the engine knows beyond the message.
	Detail string
	// Spec is the spec's kind/namespace/name.
	Spec string
	// Address is the object the problem is about.
	Address *addrs.Object
}

// Error prints file:line:col: path: message (expected …): detail.
func (d Diagnostic) Error() string {
	var b strings.Builder
	if d.Pos.File != "" {
		b.WriteString(d.Pos.String())
		b.WriteString(": ")
	}
	if d.Address != nil {
		b.WriteString(d.Address.String())
		b.WriteString(": ")
	}
	if d.Path != "" {
		b.WriteString(d.Path)
		b.WriteString(": ")
	}
	b.WriteString(d.Message)
	if d.Expected != "" {
		b.WriteString(" (expected ")
		b.WriteString(d.Expected)
		b.WriteString(")")
	}
	if d.Detail != "" {
		b.WriteString(": ")
		b.WriteString(d.Detail)
	}
	// One line, whatever a file name or a value in it holds: a newline
	// from a spec's file name would print a line of its own, a terminal
	// escape would drive the console.
	return Escape(b.String())
}

// MarshalJSON flattens the position for machines.
func (d Diagnostic) MarshalJSON() ([]byte, error) {
	var addr string
	if d.Address != nil {
		addr = d.Address.String()
	}
	return json.Marshal(struct {
		Severity string `json:"severity,omitempty"`
		File     string `json:"file,omitempty"`
		Line     int    `json:"line,omitempty"`
		Column   int    `json:"column,omitempty"`
		Path     string `json:"path,omitempty"`
		Message  string `json:"message"`
		Expected string `json:"expected,omitempty"`
		Detail   string `json:"detail,omitempty"`
		Spec     string `json:"spec,omitempty"`
		Address  string `json:"address,omitempty"`
	}{sevJSON(d.Severity), d.Pos.File, d.Pos.Line, d.Pos.Col, d.Path, d.Message, d.Expected, d.Detail, d.Spec, addr})
}

// Loader diagnostics are all errors; their JSON has always left the
// severity out.
func sevJSON(s Severity) string {
	if s == Warning {
		return "warning"
	}
	return ""
}

// UnmarshalJSON reads what MarshalJSON wrote.
func (d *Diagnostic) UnmarshalJSON(b []byte) error {
	var w struct {
		Severity string `json:"severity"`
		File     string `json:"file"`
		Line     int    `json:"line"`
		Column   int    `json:"column"`
		Path     string `json:"path"`
		Message  string `json:"message"`
		Expected string `json:"expected"`
		Detail   string `json:"detail"`
		Spec     string `json:"spec"`
		Address  string `json:"address"`
	}
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*d = Diagnostic{Pos: spec.Pos{File: w.File, Line: w.Line, Col: w.Column}, Path: w.Path, Message: w.Message,
		Expected: w.Expected, Detail: w.Detail, Spec: w.Spec}
	_ = d.Severity.UnmarshalText([]byte(w.Severity))
	if w.Address != "" {
		if a, err := addrs.ParseObject(w.Address); err == nil {
			d.Address = &a
		}
	}
	return nil
}

// Errorf-style helpers.

// New is an error diagnostic.
func New(message, detail string) Diagnostic {
	return Diagnostic{Severity: Error, Message: message, Detail: detail}
}

// About is an error diagnostic about an object.
func About(a addrs.Object, message, detail string) Diagnostic {
	return Diagnostic{Severity: Error, Message: message, Detail: detail, Address: &a}
}

// Diagnostics is a list; it is an error when not empty.
type Diagnostics []Diagnostic

func (ds Diagnostics) Error() string {
	lines := make([]string, len(ds))
	for i, d := range ds {
		lines[i] = d.Error()
	}
	return strings.Join(lines, "\n")
}

// HasErrors reports whether any diagnostic is an error.
func (ds Diagnostics) HasErrors() bool {
	for _, d := range ds {
		if d.Severity == Error {
			return true
		}
	}
	return false
}

// Err is ds as an error when it holds errors, else nil.
func (ds Diagnostics) Err() error {
	if ds.HasErrors() {
		return ds
	}
	return nil
}

// Sort orders by file, line, column, then message, so output is stable.
func (ds Diagnostics) Sort() {
	sort.SliceStable(ds, func(i, j int) bool {
		a, b := ds[i], ds[j]
		if a.Pos.File != b.Pos.File {
			return a.Pos.File < b.Pos.File
		}
		if a.Pos.Line != b.Pos.Line {
			return a.Pos.Line < b.Pos.Line
		}
		if a.Pos.Col != b.Pos.Col {
			return a.Pos.Col < b.Pos.Col
		}
		return a.Message < b.Message
	})
}
