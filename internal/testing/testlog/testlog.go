// Package testlog sends a component's structured logs to its test's log
// (t.Log), so they show next to the test that produced them and only when
// it fails or runs with -v.
package testlog

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"
)

// New returns a debug-level text logger writing to t.
func New(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(Writer{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// Writer writes each Write as one t.Log line.
type Writer struct{ T testing.TB }

func (w Writer) Write(p []byte) (int, error) {
	w.T.Helper()
	w.T.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}

// Buffer is a bytes.Buffer safe for concurrent use: a process's or a
// logger's output written by one goroutine and read by the test. The zero
// value is ready; a nil *Buffer reads as empty.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *Buffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns what was written so far.
func (s *Buffer) String() string {
	if s == nil {
		return ""
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Contains reports whether what was written so far contains sub.
func (s *Buffer) Contains(sub string) bool { return strings.Contains(s.String(), sub) }
