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
	// One spelling: what the configuration says is what metrics and
	// /events report as the source.
	for cfg, src := range map[string]pleg.Source{config.EventSourceCgroups: pleg.SourceCgroups, config.EventSourceContainerd: pleg.SourceContainerd} {
		if got, _ := pleg.ParseSource(cfg); got != src || string(src) != cfg {
			t.Errorf("%q parses to %q, want %q spelled the same", cfg, got, src)
		}
	}
}
