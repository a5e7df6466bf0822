// Package testlog sends a component's structured logs to its test's log
// (t.Log), so they show next to the test that produced them and only when
// it fails or runs with -v.
package testlog

import (
	"log/slog"
	"strings"
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
