package containerspec

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Expand replaces $(VAR) references in s with their values, as Kubernetes
// does for env values, command and args: a reference to an undefined
// variable is left as written, "$$" is an escaped "$", and any other "$" is
// kept.
func Expand(s string, lookup func(string) (string, bool)) string {
	if !strings.Contains(s, "$") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 >= len(s) {
			b.WriteByte(s[i])
			continue
		}
		switch s[i+1] {
		case '$': // escaped
			b.WriteByte('$')
			i++
		case '(':
			end := strings.IndexByte(s[i+2:], ')')
			if end < 0 { // unterminated: literal
				b.WriteString(s[i:])
				return b.String()
			}
			name := s[i+2 : i+2+end]
			if v, ok := lookup(name); ok && name != "" {
				b.WriteString(v)
			} else {
				b.WriteString(s[i : i+3+end])
			}
			i += 2 + end
		default:
			b.WriteByte('$')
		}
	}
	return b.String()
}

// ExpandAll expands each of in (nil stays nil).
func ExpandAll(in []string, lookup func(string) (string, bool)) []string {
	if in == nil {
		return nil
	}
	out := make([]string, len(in))
	for i, s := range in {
		out[i] = Expand(s, lookup)
	}
	return out
}

// envLookup looks variables up in KEY=VALUE entries.
func envLookup(env []string) func(string) (string, bool) {
	m := make(map[string]string, len(env))
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok {
			m[k] = v
		}
	}
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

// subPathExpander expands a subPathExpr with the container's environment
// (lookup), as kubelet does: every $(VAR) must name a variable with a
// non-empty value, and nothing else is expanded.
func subPathExpander(lookup func(string) (string, bool)) func(string) (string, error) {
	return func(expr string) (string, error) {
		missing := map[string]bool{}
		out := Expand(expr, func(k string) (string, bool) {
			v, ok := lookup(k)
			if !ok || v == "" {
				missing[k] = true
			}
			return v, true
		})
		if len(missing) > 0 {
			return "", fmt.Errorf("missing value for %s", strings.Join(slices.Sorted(maps.Keys(missing)), ", "))
		}
		return out, nil
	}
}
