package config

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzDecode checks that decoding never panics, that every failure is an
// *Error with problems, and that whatever decodes is valid and survives a
// round trip through its YAML rendering. The seed corpus is committed in
// testdata/fuzz/FuzzDecode.
func FuzzDecode(f *testing.F) {
	files, _ := filepath.Glob("testdata/*.yaml")
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add(DefaultsYAML())
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, _, err := DecodeBytes("fuzz.yaml", data)
		if err != nil {
			var ce *Error
			if !errors.As(err, &ce) || len(ce.Problems) == 0 {
				t.Fatalf("error %v (%T) is not a *config.Error with problems", err, err)
			}
			for _, p := range ce.Problems {
				if p.Detail == "" || p.Source != "fuzz.yaml" {
					t.Fatalf("problem without detail or source: %+v", p)
				}
				// Internal decoding errors mean the schema check let
				// something through.
				if strings.Contains(p.Detail, "merged configuration") {
					t.Fatalf("schema check gap: %+v", p)
				}
			}
			return
		}
		if errs, _ := Validate(cfg); len(errs) > 0 {
			t.Fatalf("decoded configuration is invalid: %v", errs)
		}
		var b bytes.Buffer
		render(&b, cfg, func(string) []string { return nil })
		again, _, err := DecodeBytes("roundtrip.yaml", b.Bytes())
		if err != nil {
			t.Fatalf("rendered configuration does not decode: %v\n%s", err, b.Bytes())
		}
		if d := Diff(cfg, again); len(d) > 0 {
			t.Fatalf("round trip changed %v\n%s", d, b.Bytes())
		}
	})
}
