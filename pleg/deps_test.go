package pleg

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// Only package runtime may import containerd (ARCHITECTURE.md); pleg goes
// through its small Runtime interface.
func TestNoDirectContainerdImports(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		ast, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range ast.Imports {
			if strings.HasPrefix(strings.Trim(imp.Path.Value, `"`), "github.com/containerd/") {
				t.Errorf("%s imports %s", f, imp.Path.Value)
			}
		}
	}
}
