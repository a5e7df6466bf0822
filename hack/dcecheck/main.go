// Command dcecheck fails when the Go linker's dead-code elimination of
// methods is off in a build (issue 16). It reads the linker's -dumpdep
// output (go build -ldflags=-dumpdep prints it on stderr):
//
//	hack/build.sh keeps it on; hack/check-build.sh runs
//	NODEAGENT_EXTRA_LDFLAGS=-dumpdep hack/build.sh DIR nodeagent 2>deps
//	go run ./hack/dcecheck deps
//
// Each line of -dumpdep is "from -> to", a symbol and the one that made it
// reachable, with " <ReflectMethod>" after a symbol the compiler marked as
// calling reflect's Method or MethodByName with a name it cannot see
// (cmd/link/internal/ld/deadcode.go). Once one such symbol is reachable the
// linker keeps every exported method of every reachable type, and the
// binary grows by tens of MB. So any reachable <ReflectMethod> symbol is a
// failure; the report names the first one and the chain of symbols from the
// program's entry that reached it (later ones can be consequences: methods
// kept only because the elimination was already off).
//
// It also fails when the linker keeps any symbol of a package that was cut
// from the binary to keep it small (unwanted, in unwanted.go), naming the
// chain that reached it.
package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strings"
)

const reflectMark = " <ReflectMethod>"

// blocker is a reachable symbol that switches method elimination off, with
// the chain that reached it (the symbol first, the entry last).
type blocker struct {
	sym   string
	chain []string
}

// graph is the linker's reachability tree from -dumpdep: each reachable
// symbol with the one that first made it reachable.
type graph struct {
	parent map[string]string
	order  []string // symbols in the order they became reachable
	marked []string // <ReflectMethod> symbols, in that order
	edges  int
}

// parseDump parses -dumpdep output. Lines that are not edges (the go
// command's "# package" header) are skipped.
func parseDump(r io.Reader) (*graph, error) {
	g := &graph{parent: map[string]string{}}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		from, to, ok := strings.Cut(sc.Text(), " -> ")
		if !ok {
			continue
		}
		g.edges++
		name := stripFlags(to)
		if _, seen := g.parent[name]; seen {
			continue
		}
		g.parent[name] = stripFlags(from)
		g.order = append(g.order, name)
		if strings.Contains(to, reflectMark) {
			g.marked = append(g.marked, name)
		}
	}
	return g, sc.Err()
}

// chain is s and the symbols that reached it, the entry last.
func (g *graph) chain(s string) []string {
	c := []string{s}
	for p := g.parent[s]; p != "" && p != "_" && len(c) < 100; p = g.parent[p] {
		c = append(c, p)
	}
	return c
}

// findBlockers parses -dumpdep output and returns its <ReflectMethod>
// symbols with their chains, and the number of edges.
func findBlockers(r io.Reader) ([]blocker, int, error) {
	g, err := parseDump(r)
	if err != nil {
		return nil, g.edges, err
	}
	return g.blockers(), g.edges, nil
}

func (g *graph) blockers() []blocker {
	var out []blocker
	for _, s := range g.marked {
		out = append(out, blocker{sym: s, chain: g.chain(s)})
	}
	return out
}

// stripFlags drops the " <UsedInIface><ReflectMethod>" flags after a name.
func stripFlags(s string) string {
	if i := strings.Index(s, " <"); i >= 0 {
		return s[:i]
	}
	return s
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: dcecheck DUMPDEP-OUTPUT")
		os.Exit(2)
	}
	f, err := os.Open(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, "dcecheck:", err)
		os.Exit(2)
	}
	defer f.Close()
	g, err := parseDump(f)
	if err != nil {
		fmt.Fprintln(os.Stderr, "dcecheck:", err)
		os.Exit(2)
	}
	// An empty or truncated dump would pass vacuously.
	if g.edges < 1000 {
		fmt.Fprintf(os.Stderr, "dcecheck: %s has %d dependency edges: not the output of go build -ldflags=-dumpdep\n", os.Args[1], g.edges)
		os.Exit(2)
	}
	failed := false
	for _, u := range findUnwanted(g) {
		failed = true
		fmt.Printf("dcecheck: the binary links %s again (%s). Its first symbol, reached by (entry last):\n  %s\n", u.pkg, u.why, strings.Join(u.chain, "\n    <- "))
	}
	bs := g.blockers()
	if len(bs) == 0 {
		fmt.Printf("dcecheck: method dead-code elimination is on (%d reachable symbols, none calls reflect methods by a computed name)\n", g.edges)
		if failed {
			os.Exit(1)
		}
		return
	}
	fmt.Printf("dcecheck: method dead-code elimination is OFF: %d reachable symbols call reflect's Method/MethodByName with a computed name.\n", len(bs))
	fmt.Printf("The first, reached by (entry last):\n  %s\n", strings.Join(bs[0].chain, "\n    <- "))
	fmt.Println("All of them (later ones may only be kept because elimination is already off):")
	for _, b := range bs {
		fmt.Printf("  %s  (via %s)\n", b.sym, b.chain[min(1, len(b.chain)-1)])
	}
	os.Exit(1)
}
