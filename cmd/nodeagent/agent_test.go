package main

import (
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/nodeagent/nodeagent/config"
)

// TestNewLoggerJournal checks that newLogger prefixes lines with their
// syslog priority exactly when JOURNAL_STREAM names this process's stderr,
// as systemd sets it for a unit whose stderr is the journal.
func TestNewLoggerJournal(t *testing.T) {
	var st syscall.Stat_t
	if err := syscall.Fstat(int(os.Stderr.Fd()), &st); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		desc, env  string
		wantPrefix bool
		wantWarn   bool
	}{
		{desc: "unset", env: ""},
		{desc: "stderr's device and inode", env: fmt.Sprintf("%d:%d", st.Dev, st.Ino), wantPrefix: true},
		{desc: "another stream", env: fmt.Sprintf("%d:%d", st.Dev, st.Ino+1)},
		{desc: "malformed", env: "journal", wantWarn: true},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Setenv("JOURNAL_STREAM", tc.env)
			var buf bytes.Buffer
			log := newLogger(&buf, config.LoggingConfiguration{Format: "text"}, new(slog.LevelVar))
			log.Info("hello")
			out := buf.String()
			t.Logf("output:\n%s", out)
			lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
			last := lines[len(lines)-1]
			if got := strings.HasPrefix(last, "<6>"); got != tc.wantPrefix {
				t.Errorf("info line %q: priority prefix %v, want %v", last, got, tc.wantPrefix)
			}
			if got := strings.Contains(out, "cannot tell whether stderr is the journal"); got != tc.wantWarn {
				t.Errorf("warning about JOURNAL_STREAM logged: %v, want %v", got, tc.wantWarn)
			}
		})
	}
}
