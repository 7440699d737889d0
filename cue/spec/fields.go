package spec

import "slices"

// Fields returns the field positions of the document, sorted by path: what
// NewSource was given. A Source must sometimes leave the process it was made
// in (a CUE spec file is evaluated in a bounded child process and its
// documents are sent back), and NewSource(s.Pos, s.Fields()) rebuilds it.
// The slice is a copy, so a caller cannot reorder the original.
func (s Source) Fields() []FieldPos { return slices.Clone(s.fields) }
