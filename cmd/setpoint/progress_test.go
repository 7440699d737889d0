package main

import (
	"bytes"
	"testing"
)

func TestProgress(t *testing.T) {
	var b bytes.Buffer
	if newProgress(&b, "x") != nil {
		t.Fatal("a buffer is not a terminal: no progress")
	}
	p := &progress{w: &b, what: "validating files"}
	p.update(1, 3)
	p.update(2, 3)
	p.update(3, 3) // the last is not shown: the summary follows
	p.done()
	if got, want := b.String(), "\rvalidating files: 1/3\rvalidating files: 2/3\r\x1b[K"; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
	var nilP *progress
	nilP.update(1, 2) // off: no panic, nothing written
	nilP.done()
}
