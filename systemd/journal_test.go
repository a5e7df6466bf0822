package systemd

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
)

func TestJournalHandlerPrefixes(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(NewJournalHandler(&buf, func(w io.Writer) slog.Handler {
		return slog.NewTextHandler(w, &slog.HandlerOptions{
			Level: slog.LevelDebug,
			// no time: stable output
			ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
				if a.Key == slog.TimeKey {
					return slog.Attr{}
				}
				return a
			},
		})
	}))
	log.Debug("d")
	log.Info("i", "k", "multi\nline")
	log.With("component", "heartbeat").Warn("w")
	log.WithGroup("g").Error("e", "k", 1)
	log.Log(context.Background(), slog.LevelError+4, "above error")

	want := []string{
		`<7>level=DEBUG msg=d`,
		`<6>level=INFO msg=i k="multi\nline"`,
		`<4>level=WARN msg=w component=heartbeat`,
		`<3>level=ERROR msg=e g.k=1`,
		`<3>level=ERROR+4 msg="above error"`,
	}
	got := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	if len(got) != len(want) {
		t.Fatalf("got %d lines, want %d:\n%s", len(got), len(want), buf.String())
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("line %d: got %q, want %q", i, got[i], want[i])
		}
	}
}

func TestJournalHandlerRespectsLevel(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(NewJournalHandler(&buf, func(w io.Writer) slog.Handler {
		return slog.NewJSONHandler(w, &slog.HandlerOptions{Level: slog.LevelWarn})
	}))
	log.Info("dropped")
	log.Warn("kept")
	if s := buf.String(); strings.Contains(s, "dropped") || !strings.HasPrefix(s, `<4>{"time"`) {
		t.Errorf("output %q: want only the warning, prefixed", s)
	}
}

// Concurrent records from derived loggers never interleave or get another
// record's prefix.
func TestJournalHandlerConcurrent(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(NewJournalHandler(&buf, func(w io.Writer) slog.Handler { return slog.NewTextHandler(w, nil) }))
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			l := log.With("g", g)
			for i := 0; i < 200; i++ {
				if i%2 == 0 {
					l.Warn("w")
				} else {
					l.Info("i")
				}
			}
		}(g)
	}
	wg.Wait()
	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	if len(lines) != 800 {
		t.Fatalf("got %d lines, want 800", len(lines))
	}
	for _, l := range lines {
		ok := strings.HasPrefix(l, "<4>") && strings.Contains(l, "level=WARN msg=w") ||
			strings.HasPrefix(l, "<6>") && strings.Contains(l, "level=INFO msg=i")
		if !ok {
			t.Fatalf("bad line %q", l)
		}
	}
}

func TestPriorityPrefix(t *testing.T) {
	for _, tc := range []struct {
		level slog.Level
		want  string
	}{
		{slog.LevelDebug - 4, "<7>"}, {slog.LevelDebug, "<7>"}, {slog.LevelInfo - 1, "<7>"},
		{slog.LevelInfo, "<6>"}, {slog.LevelWarn - 1, "<6>"}, {slog.LevelWarn, "<4>"},
		{slog.LevelError, "<3>"}, {slog.LevelError + 8, "<3>"},
	} {
		t.Run(fmt.Sprint(tc.level), func(t *testing.T) {
			if got := priorityPrefix(tc.level); got != tc.want {
				t.Errorf("priorityPrefix(%v) = %q, want %q", tc.level, got, tc.want)
			}
		})
	}
}
