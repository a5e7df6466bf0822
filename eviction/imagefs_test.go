package eviction

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
)

func TestDedicatedImageFS(t *testing.T) {
	root := t.TempDir()
	at := func(dir string, err error) func(context.Context) (string, error) {
		return func(context.Context) (string, error) { return dir, err }
	}
	for _, tc := range []struct {
		desc    string
		imageFS func(context.Context) (string, error)
		want    bool
	}{
		{"same filesystem", at(t.TempDir(), nil), false},
		{"another filesystem", at("/proc", nil), true},
		{"runtime cannot tell: shared", at("", errors.New("unavailable")), false},
		{"image filesystem missing: shared", at(filepath.Join(root, "missing"), nil), false},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			if got := DedicatedImageFS(context.Background(), tc.imageFS, root); got != tc.want {
				t.Errorf("DedicatedImageFS = %v, want %v", got, tc.want)
			}
		})
	}
}
