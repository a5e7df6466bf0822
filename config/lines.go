package config

import (
	"k8s.io/apimachinery/pkg/util/validation/field"

	yamlv3 "go.yaml.in/yaml/v3"
)

// maxLineDepth bounds the nesting indexed for line numbers.
const maxLineDepth = 8

// lineIndex maps the field paths of a YAML document to the line of their
// key, so that problems can point at the line. Mapping keys are indexed both
// as fields (a.b) and as map keys (a[b]) since the index does not know the
// schema. It returns nil if data does not parse.
func lineIndex(data []byte) (idx map[string]int) {
	defer func() {
		if recover() != nil { // line numbers are a nicety; never fail on them
			idx = nil
		}
	}()
	var doc yamlv3.Node
	if err := yamlv3.Unmarshal(data, &doc); err != nil || doc.Kind != yamlv3.DocumentNode || len(doc.Content) == 0 {
		return nil
	}
	idx = map[string]int{}
	indexNode(idx, doc.Content[0], nil, 0)
	return idx
}

func indexNode(idx map[string]int, n *yamlv3.Node, p *field.Path, depth int) {
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
				if p == nil {
					indexNode(idx, v, cp, depth+1)
					break // top-level keys are always fields
				}
				indexNode(idx, v, cp, depth+1)
			}
		}
	case yamlv3.SequenceNode:
		for i, e := range n.Content {
			cp := p.Index(i)
			idx[cp.String()] = e.Line
			indexNode(idx, e, cp, depth+1)
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
