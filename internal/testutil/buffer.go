// Package testutil holds helpers shared by tests in several packages.
package testutil

import (
	"strings"
	"sync"
)

// Buffer is a strings.Builder safe for the concurrent writes of a
// subprocess's output or a logger.
type Buffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *Buffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *Buffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
