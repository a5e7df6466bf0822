package pods

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// Issue 25 halved the worker (43 fields and 76 methods on one type): new
// work on a pod goes into a per-pod helper with its own job and its own
// collaborators (see doc.go), not onto the worker. This keeps it so.
const (
	maxWorkerFields  = 21
	maxWorkerMethods = 38
)

func TestWorkerStaysSmall(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	fields, methods := 0, map[string]string{}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		af, err := parser.ParseFile(fset, f, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range af.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if d.Recv == nil || len(d.Recv.List) != 1 {
					continue
				}
				if star, ok := d.Recv.List[0].Type.(*ast.StarExpr); ok {
					if id, ok := star.X.(*ast.Ident); ok && id.Name == "worker" {
						methods[d.Name.Name] = f
					}
				}
			case *ast.GenDecl:
				for _, s := range d.Specs {
					ts, ok := s.(*ast.TypeSpec)
					if !ok || ts.Name.Name != "worker" {
						continue
					}
					for _, fl := range ts.Type.(*ast.StructType).Fields.List {
						fields += max(len(fl.Names), 1)
					}
				}
			}
		}
	}
	if fields == 0 || len(methods) == 0 {
		t.Fatalf("type worker not found (%d fields, %d methods)", fields, len(methods))
	}
	if fields > maxWorkerFields {
		t.Errorf("type worker has %d fields, at most %d: give the new state to a per-pod helper (doc.go)", fields, maxWorkerFields)
	}
	if len(methods) > maxWorkerMethods {
		t.Errorf("type worker has %d methods, at most %d: give the new job to a per-pod helper (doc.go)", len(methods), maxWorkerMethods)
	}
	t.Logf("worker: %d fields, %d methods", fields, len(methods))
}
