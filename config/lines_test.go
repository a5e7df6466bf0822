package config

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"

	yamlv3 "go.yaml.in/yaml/v3"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// v3LineIndex is lineIndex computed from go.yaml.in/yaml/v3's node tree
// (the agent's index before issue 16 dropped the library from the
// binary): the reference the block reader is checked against.
func v3LineIndex(data []byte) map[string]int {
	var doc yamlv3.Node
	if err := yamlv3.Unmarshal(data, &doc); err != nil || doc.Kind != yamlv3.DocumentNode || len(doc.Content) == 0 {
		return nil
	}
	idx := map[string]int{}
	var walk func(n *yamlv3.Node, p *field.Path, depth int)
	walk = func(n *yamlv3.Node, p *field.Path, depth int) {
		if depth >= maxLineDepth || len(idx) > 10000 {
			return
		}
		switch n.Kind {
		case yamlv3.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				k, v := n.Content[i], n.Content[i+1]
				if k.Kind != yamlv3.ScalarNode {
					continue
				}
				for _, cp := range []*field.Path{p.Child(k.Value), p.Key(k.Value)} {
					if _, seen := idx[cp.String()]; !seen {
						idx[cp.String()] = k.Line
					}
					walk(v, cp, depth+1)
					if p == nil {
						break
					}
				}
			}
		case yamlv3.SequenceNode:
			for i, e := range n.Content {
				cp := p.Index(i)
				idx[cp.String()] = e.Line
				walk(e, cp, depth+1)
			}
		}
	}
	walk(doc.Content[0], nil, 0)
	return idx
}

// blockCases are YAML documents in the shapes configuration files take,
// plus the corners the block reader must follow.
var blockCases = map[string]string{
	"flat":                   "apiVersion: nodeagent.io/v1alpha1\nkind: NodeAgentConfiguration\nmaxPods: 10\n",
	"nested":                 "a:\n  b:\n    c: 1\n  d: 2\ne: 3\n",
	"sequences":              "registerWithTaints:\n- key: a\n  effect: Never\n- key: b\n  value: c\npleg:\n  eventSources:\n  - cgroups\n  - kernel\n",
	"indented sequence":      "a:\n  - x\n  - y\nb:\n    - k: 1\n      l: 2\n",
	"comments":               "# head\na: 1 # trailing\n\n  # indented comment\nb:\n  # inside\n  c: \"x # not a comment\"\n  d: 'it''s # not'\n",
	"quoted keys":            "\"a.b\": 1\n'c d': 2\nmap:\n  \"memory.available\": 1Gi\n  'nodefs.available': 10%\n",
	"block scalars":          "a: |\n  line one\n  k: not a key\nb: >-\n  folded\n  text\nc:\n- |\n  item\n- d\n",
	"multi-line plain":       "a: one\n  two\n  three\nb: 2\n",
	"flow collections":       "a: {x: 1, y: 2}\nb: [1, 2,\n  3]\nc:\n  d: []\n",
	"document marker":        "---\na: 1\nb:\n  c: 2\n",
	"null values":            "a:\nb: ~\nc:\n  d:\n",
	"nested sequences":       "a:\n- - x\n  - y\n- - z\n",
	"item maps on next line": "a:\n-\n  k: 1\n  l: 2\n- k: 3\n",
	"anchors":                "a: &x\n  b: 1\nc: *x\nd: !!str 5\n",
	"colons in values":       "url: http://example.com:8080/x\ntime: 12:30\nkey:with:colons: 1\n",
	"crlf":                   "a: 1\r\nb:\r\n  c: 2\r\n",
	"eviction":               "evictionHard:\n  memory.available: 1Gi\n  nodefs.available: 200%\nevictionSoft:\n  memory.available: 2Gi\nevictionSoftGracePeriod:\n  memory.available: 30s\n",
}

// TestLineIndexMatchesYAMLv3: on every case and every configuration file
// in testdata and docs, the block reader's index is yaml.v3's.
func TestLineIndexMatchesYAMLv3(t *testing.T) {
	cases := maps.Clone(blockCases)
	for _, glob := range []string{"testdata/*.yaml", "../docs/*.yaml", "../hack/*/*.yaml", "../packaging/*/*.yaml"} {
		files, _ := filepath.Glob(glob)
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			if v3LineIndex(b) != nil {
				cases[f] = string(b)
			}
		}
	}
	if len(cases) < len(blockCases)+2 {
		t.Fatalf("only %d cases: the testdata files are missing", len(cases))
	}
	for _, name := range slices.Sorted(maps.Keys(cases)) {
		data := []byte(cases[name])
		want := v3LineIndex(data)
		got := lineIndex(data)
		if want == nil {
			t.Errorf("%s: yaml.v3 does not parse it", name)
			continue
		}
		if !maps.Equal(got, want) {
			t.Errorf("%s: lineIndex\n got %v\nwant %v", name, got, want)
		}
	}
}

// What the reader does not follow it gives up on: no lines rather than
// wrong ones.
func TestLineIndexGivesUp(t *testing.T) {
	for name, data := range map[string]string{
		"explicit key":            "? a\n: 1\n",
		"tab indentation":         "a:\n\tb: 1\n",
		"scalar document":         "just text\n",
		"escaped key":             "\"a\\u0041\": 1\n",
		"pair in a flow sequence": "a: [k: v]\n",
	} {
		if got := lineIndex([]byte(data)); got != nil {
			t.Errorf("%s: lineIndex = %v, want nil", name, got)
		}
	}
}

// FuzzLineIndex: whatever the document, a line the block reader gives is
// the line yaml.v3 gives (it may give fewer, or none).
func FuzzLineIndex(f *testing.F) {
	for _, c := range blockCases {
		f.Add([]byte(c))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		want := v3LineIndex(data)
		if want == nil {
			return // not YAML: decode reports it before any line is needed
		}
		for path, line := range lineIndex(data) {
			if w, ok := want[path]; !ok || w != line {
				t.Errorf("%q: %s at line %d, yaml.v3: %d (present %v)", data, path, line, w, ok)
			}
		}
	})
}
