package main

import (
	"reflect"
	"testing"
	"time"

	"github.com/nodeagent/nodeagent/config"
	"github.com/nodeagent/nodeagent/shutdown"
)

// shutdownGracePeriodByPodPriority reaches the manager as bands of whole
// seconds, in the file's order (the manager sorts them).
func TestShutdownBands(t *testing.T) {
	got := shutdownBands([]config.ShutdownGracePeriodByPodPriority{{Priority: 2000000000, ShutdownGracePeriodSeconds: 10}, {Priority: -5, ShutdownGracePeriodSeconds: 30}})
	want := []shutdown.Band{{Priority: 2000000000, Grace: 10 * time.Second}, {Priority: -5, Grace: 30 * time.Second}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("shutdownBands = %v, want %v", got, want)
	}
	if got := shutdownBands(nil); len(got) != 0 {
		t.Errorf("shutdownBands(nil) = %v", got)
	}
}
