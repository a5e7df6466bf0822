package main

import (
	"testing"

	"github.com/nodeagent/nodeagent/config"
	"github.com/nodeagent/nodeagent/pleg"
)

// Every event source the configuration accepts must be one the PLEG knows,
// or the agent would silently run with fewer sources than configured.
func TestConfigEventSourcesParse(t *testing.T) {
	for _, s := range append(config.Default().PLEG.EventSources, config.EventSourceCgroups, config.EventSourceContainerd) {
		if _, err := pleg.ParseSource(s); err != nil {
			t.Errorf("config event source %q: %v", s, err)
		}
	}
	if src, _ := pleg.ParseSource(config.EventSourceCgroups); src != pleg.SourceCgroup {
		t.Errorf("%q parses to %q, want %q", config.EventSourceCgroups, src, pleg.SourceCgroup)
	}
}
