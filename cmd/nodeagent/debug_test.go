package main

import (
	"bytes"
	"io"
	"log/slog"
	"testing"
	"time"
)

// stuckWriter blocks every write until release is closed.
type stuckWriter struct{ entered, release chan struct{} }

func (w stuckWriter) Write(p []byte) (int, error) {
	w.entered <- struct{}{}
	<-w.release
	return len(p), nil
}

// The node API's log check flushes the log output: the flush returns only
// once a write in progress has gone through.
func TestLogOutputFlushWaitsForAStuckWrite(t *testing.T) {
	w := stuckWriter{entered: make(chan struct{}, 1), release: make(chan struct{})}
	out := &logOutput{w: w}
	go func() { _, _ = out.Write([]byte("line\n")) }()
	<-w.entered
	flushed := make(chan struct{})
	go func() { out.flush(); close(flushed) }()
	select {
	case <-flushed:
		t.Fatal("flush returned while a write was stuck")
	case <-time.After(100 * time.Millisecond):
	}
	close(w.release)
	select {
	case <-flushed:
	case <-time.After(10 * time.Second):
		t.Fatal("flush did not return after the write went through")
	}
	// With nothing in progress it returns at once.
	out.flush()
}

// PUT /debug/flags/v sets the level the logger filters at, as
// logging.verbosity does.
func TestSetVerbosity(t *testing.T) {
	var buf bytes.Buffer
	level := new(slog.LevelVar)
	a := &agent{level: level, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: level}))
	log.Debug("hidden")
	if err := a.setVerbosity(4); err != nil {
		t.Fatal(err)
	}
	if level.Level() != verbosityLevel(4) {
		t.Errorf("level %v, want %v", level.Level(), verbosityLevel(4))
	}
	log.Debug("shown")
	if s := buf.String(); bytes.Contains([]byte(s), []byte("hidden")) || !bytes.Contains([]byte(s), []byte("shown")) {
		t.Errorf("log %q", s)
	}
	if err := a.setVerbosity(1 << 31); err == nil {
		t.Error("verbosity 2^31 accepted")
	}
}
