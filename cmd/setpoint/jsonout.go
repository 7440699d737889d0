package main

import (
	"encoding/json"
	"io"
)

// jsonOut is how every command prints JSON: indented for people, and with
// <, > and & as themselves (HTML escaping would mangle PromQL and reasons).
func jsonOut(w io.Writer) *json.Encoder {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc
}
