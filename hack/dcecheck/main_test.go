package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestFindBlockers(t *testing.T) {
	dump := `# example.com/x
_ -> main.main
main.main -> fmt.Println
main.main -> text/template.(*Template).Execute
text/template.(*Template).Execute -> text/template.(*state).evalField <ReflectMethod>
type:reflect.Value <UsedInIface> -> reflect.(*Value).Method <ReflectMethod>
fmt.Println -> text/template.(*state).evalField <ReflectMethod>
`
	bs, edges, err := findBlockers(strings.NewReader(dump))
	if err != nil {
		t.Fatal(err)
	}
	if edges != 6 {
		t.Errorf("edges = %d, want 6", edges)
	}
	if len(bs) != 2 {
		t.Fatalf("blockers = %+v, want 2", bs)
	}
	want := []string{"text/template.(*state).evalField", "text/template.(*Template).Execute", "main.main"}
	if got := bs[0].chain; strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("chain = %q, want %q (the first parent, flags stripped)", got, want)
	}
	if bs[1].sym != "reflect.(*Value).Method" || bs[1].chain[1] != "type:reflect.Value" {
		t.Errorf("second blocker = %+v", bs[1])
	}
}

// TestRealLinker checks the signal against the real linker: a program that
// calls a method by a computed name is flagged, one that calls it by a
// constant name (which Go 1.22+ keeps elimination on for) is not.
func TestRealLinker(t *testing.T) {
	if testing.Short() {
		t.Skip("builds two programs")
	}
	for _, tc := range []struct {
		name, call string
		blocked    bool
	}{
		{"computed name", `reflect.ValueOf(T{}).MethodByName(os.Args[0])`, true},
		{"constant name", `reflect.ValueOf(T{}).MethodByName("Hello"); _ = os.Args`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			src := "package main\n\nimport (\n\t\"os\"\n\t\"reflect\"\n)\n\ntype T struct{}\n\nfunc (T) Hello() {}\n\nfunc main() {\n\t_ = " + tc.call + "\n}\n"
			if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(src), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module example.com/dce\n\ngo 1.22\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command("go", "build", "-ldflags=-dumpdep", "-o", filepath.Join(dir, "x"), ".")
			cmd.Dir = dir
			cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=")
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			if err := cmd.Run(); err != nil {
				t.Fatalf("go build: %v\n%s", err, stderr.String())
			}
			bs, edges, err := findBlockers(&stderr)
			if err != nil {
				t.Fatal(err)
			}
			if edges < 1000 {
				t.Fatalf("only %d edges: not -dumpdep output?", edges)
			}
			if got := len(bs) > 0; got != tc.blocked {
				t.Errorf("blocked = %v (%+v), want %v", got, bs, tc.blocked)
			}
			if tc.blocked && bs[0].chain[len(bs[0].chain)-1] == bs[0].sym {
				t.Errorf("no chain for %s", bs[0].sym)
			}
		})
	}
}
