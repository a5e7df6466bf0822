package main

import "strings"

// unwanted are packages that were cut from the agent's binary (issue 16)
// and must stay out of it. Most of them are still imported (by client-go,
// gRPC or containerd), so `go list -deps` cannot guard them: what matters
// is whether the linker keeps any of their symbols. An entry ending in
// "/..." also covers the packages below it.
var unwanted = []struct{ pkg, why string }{
	{"k8s.io/apimachinery/pkg/runtime/serializer/cbor", "internal/kubeclient's codecs are JSON and protobuf only; client-go's CodecFactoryForGeneratedClient links the CBOR serializer"},
	{"go.yaml.in/yaml/v3", "config reads line numbers with its own block reader (config/yamlblocks.go); YAML is decoded with sigs.k8s.io/yaml (yaml/v2)"},
	{"golang.org/x/net/trace", "gRPC's request tracing; build with -tags grpcnotrace (its html/template also switches method elimination off)"},
	{"html/template", "switches method elimination off (calls methods by name)"},
	{"github.com/containerd/containerd/contrib/apparmor", "runtime/apparmor.go renders the profile; containerd's text/template rendering switches method elimination off"},
	{"k8s.io/client-go/kubernetes/...", "links every API group; use internal/kubeclient"},
	{"k8s.io/client-go/informers/...", "links every API group; build informers with internal/informer"},
}

// unwantedHit is a reachable symbol of an unwanted package.
type unwantedHit struct {
	pkg, why string
	chain    []string
}

// findUnwanted returns, per unwanted package, the first symbol of it that
// is reachable other than through the package's own initialisation, with
// the chain that reached it (the symbol first, the entry last).
func findUnwanted(g *graph) []unwantedHit {
	var out []unwantedHit
	for _, u := range unwanted {
	syms:
		for _, sym := range g.order {
			// go:info.* is type information for DWARF, which -w drops.
			if strings.HasPrefix(sym, "go:info.") || !symbolOf(sym, u.pkg) {
				continue
			}
			// A package that is imported at all keeps its package
			// initialisation (client-go/rest imports the CBOR serializer,
			// whose init fills a small table); what counts is what else
			// reaches it.
			chain := g.chain(sym)
			for _, s := range chain {
				if strings.HasSuffix(s, "..inittask") && symbolOf(s, u.pkg) {
					continue syms
				}
			}
			out = append(out, unwantedHit{pkg: u.pkg, why: u.why, chain: chain})
			break
		}
	}
	return out
}

// symbolOf reports whether linker symbol sym belongs to package pkg (or,
// for "a/b/...", to a/b or a package below it): sym names pkg followed by
// "." ("pkg.F", "pkg.(*T).M", "type:*pkg.T", "go:itab.*pkg.T,...") and
// pkg is not the tail of a longer path.
func symbolOf(sym, pkg string) bool {
	prefix, tree := strings.CutSuffix(pkg, "/...")
	for i := 0; ; {
		j := strings.Index(sym[i:], prefix)
		if j < 0 {
			return false
		}
		j += i
		end := j + len(prefix)
		startOK := j == 0 || !isPathByte(sym[j-1])
		endOK := end < len(sym) && (sym[end] == '.' || tree && sym[end] == '/')
		if startOK && endOK {
			return true
		}
		i = j + 1
	}
}

func isPathByte(c byte) bool {
	return c == '/' || c == '-' || c == '_' || c == '.' || c == '~' ||
		'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
}
