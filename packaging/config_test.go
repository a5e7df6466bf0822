// Package packaging holds the files the deb and rpm packages install (unit,
// default configuration, environment file, maintainer scripts, nfpm
// configuration); hack/package.sh builds the packages. The Go test here keeps
// the shipped configuration valid as the config package evolves.
package packaging

import (
	"testing"

	"github.com/nodeagent/nodeagent/config"
)

// TestDefaultConfigValidates loads the packaged /etc/nodeagent/config.yaml the
// way the agent does: strictly, defaulted and validated.
func TestDefaultConfigValidates(t *testing.T) {
	c, warnings, err := config.Load(config.LoadOptions{Path: "config.yaml"})
	if err != nil {
		t.Fatalf("packaged config.yaml does not load: %v", err)
	}
	if len(warnings) > 0 {
		t.Errorf("packaged config.yaml loads with warnings: %q", warnings)
	}
	// The package ships the manifests directory and the config points at it.
	if c.StaticPodPath != config.DefaultStaticPodPath {
		t.Errorf("staticPodPath = %q, want %q", c.StaticPodPath, config.DefaultStaticPodPath)
	}
	// Everything else is the default, so a commented file cannot drift from
	// what `nodeagent config defaults` prints.
	want := config.Default()
	want.StaticPodPath = c.StaticPodPath
	if diff := config.Diff(want, c); len(diff) > 0 {
		t.Errorf("packaged config.yaml differs from the defaults in %v", diff)
	}
}
