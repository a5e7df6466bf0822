package systemd

import (
	"context"
	"io"
	"log/slog"
	"sync"
)

// NewJournalHandler returns a slog.Handler that formats records with the
// handler newHandler builds (slog.NewTextHandler, slog.NewJSONHandler, ...)
// and writes each one to w prefixed with its sd-daemon(3) syslog priority:
// "<3>" error, "<4>" warning, "<6>" info, "<7>" debug. journald strips the
// prefix and stores the line with that priority, so `journalctl -u nodeagent
// -p warning` shows warnings and errors only. Use it when go-systemd's
// journal.StderrIsJournalStream reports that stderr goes to the journal;
// elsewhere the prefixes are noise.
//
// newHandler is called once; handlers derived with WithAttrs and WithGroup
// share its writer. The handler is safe for concurrent use.
func NewJournalHandler(w io.Writer, newHandler func(io.Writer) slog.Handler) slog.Handler {
	pw := &prefixWriter{w: w}
	return &journalHandler{inner: newHandler(pw), out: pw}
}

type journalHandler struct {
	inner slog.Handler
	out   *prefixWriter
}

// prefixWriter writes prefix before every write; Handle sets prefix and calls
// the inner handler (which writes each record in one Write) under mu.
type prefixWriter struct {
	mu     sync.Mutex
	w      io.Writer
	prefix string
	buf    []byte
}

func (p *prefixWriter) Write(b []byte) (int, error) {
	p.buf = append(append(p.buf[:0], p.prefix...), b...)
	if _, err := p.w.Write(p.buf); err != nil {
		return 0, err
	}
	return len(b), nil
}

func (h *journalHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return h.inner.Enabled(ctx, l)
}

func (h *journalHandler) Handle(ctx context.Context, r slog.Record) error {
	h.out.mu.Lock()
	defer h.out.mu.Unlock()
	h.out.prefix = priorityPrefix(r.Level)
	return h.inner.Handle(ctx, r)
}

func (h *journalHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &journalHandler{inner: h.inner.WithAttrs(as), out: h.out}
}

func (h *journalHandler) WithGroup(name string) slog.Handler {
	return &journalHandler{inner: h.inner.WithGroup(name), out: h.out}
}

// priorityPrefix maps a slog level to a syslog priority prefix (sd-daemon(3)).
func priorityPrefix(l slog.Level) string {
	switch {
	case l >= slog.LevelError:
		return "<3>"
	case l >= slog.LevelWarn:
		return "<4>"
	case l >= slog.LevelInfo:
		return "<6>"
	default:
		return "<7>"
	}
}
