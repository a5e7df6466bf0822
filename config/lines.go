package config

import (
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// maxLineDepth bounds the nesting indexed for line numbers.
const maxLineDepth = 8

// lineIndex maps the field paths of a YAML document to the line of their
// key, so that problems can point at the line. Mapping keys are indexed both
// as fields (a.b) and as map keys (a[b]) since the index does not know the
// schema. It returns nil if data does not parse.
//
// The index comes from a small reader of YAML's block structure
// (yamlblocks.go) rather than a YAML library's node tree: the agent decodes
// YAML with sigs.k8s.io/yaml (go.yaml.in/yaml/v2, which keeps no
// positions), and a second YAML library only for line numbers cost 220 KB
// of binary (issue 16). The data has already parsed as YAML when this
// runs; the reader gives up (nil) on what it does not follow.
func lineIndex(data []byte) (idx map[string]int) {
	defer func() {
		if recover() != nil { // line numbers are a nicety; never fail on them
			idx = nil
		}
	}()
	root, ok := parseBlocks(string(data))
	if !ok || root == nil {
		return nil
	}
	idx = map[string]int{}
	indexNode(idx, root, nil, 0)
	return idx
}

func indexNode(idx map[string]int, n *blockNode, p *field.Path, depth int) {
	if n == nil || depth >= maxLineDepth || len(idx) > 10000 {
		return
	}
	switch n.kind {
	case blockMap:
		for _, e := range n.entries {
			for _, cp := range []*field.Path{p.Child(e.key), p.Key(e.key)} {
				if _, seen := idx[cp.String()]; !seen {
					idx[cp.String()] = e.line
				}
				if p == nil {
					indexNode(idx, e.value, cp, depth+1)
					break // top-level keys are always fields
				}
				indexNode(idx, e.value, cp, depth+1)
			}
		}
	case blockSeq:
		for i, e := range n.entries {
			cp := p.Index(i)
			idx[cp.String()] = e.line
			indexNode(idx, e.value, cp, depth+1)
		}
	}
}

// lineOf returns the line of path or of its closest parent, or 0.
func lineOf(idx map[string]int, path string) int {
	for path != "" {
		if l, ok := idx[path]; ok {
			return l
		}
		i := lastSep(path)
		if i <= 0 {
			return 0
		}
		path = path[:i]
	}
	return 0
}

func lastSep(path string) int {
	for i := len(path) - 1; i >= 0; i-- {
		if path[i] == '.' || path[i] == '[' {
			return i
		}
	}
	return -1
}

// trimmed is s without leading and trailing spaces.
func trimmed(s string) string { return strings.Trim(s, " ") }
