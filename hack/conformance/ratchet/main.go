// Command ratchet judges a run of the upstream conformance specs
// (hack/conformance.sh) against the checked-in list of specs known not to
// pass yet, hack/conformance/known-failures.txt:
//
//	ratchet --results FILE --known FILE [--update --docs FILE --wall SECONDS]
//
// It prints one line per spec (PASSED, FAILED, SKIPPED, ... with its time,
// and whether a failure is known), then the specs that do not pass and are
// not on the list (regressions: the exit status is 1) and the listed specs
// that pass now (they should leave the list).
//
// With --update it rewrites the list from the run instead: listed specs that
// still do not pass keep their group and reason, passing ones leave, and new
// failures join the group "Not classified yet" with their failure message,
// on one line and shortened, as the reason; specs the run did not include stay as they
// are. It also rewrites the generated part of --docs (docs/conformance.md).
// Specs matching --must-pass (the NodeLease specs) never go on the list: they
// always gate.
//
// The results file has one JSON object per line, as the conformance suite
// writes it (hack/controlplane/conformance, --nodeagent.results).
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"sort"
	"strings"
)

// Result is one spec's outcome.
type Result struct {
	Name     string  `json:"name"`
	State    string  `json:"state"`
	Seconds  float64 `json:"seconds"`
	Message  string  `json:"message,omitempty"`
	Location string  `json:"location,omitempty"`
}

// Entry is a spec on the list, with why it does not pass.
type Entry struct {
	Name   string
	Reason string
}

// Group is a heading of the list: the capability its specs need.
type Group struct {
	Title   string
	Entries []Entry
}

// Known is the parsed list.
type Known struct {
	Header []string // the comment lines before the first group, verbatim
	Groups []Group
}

// unclassified is where --update puts new failures.
const unclassified = "Not classified yet"

// separator splits a spec line into name and reason.
const separator = " | "

func main() {
	resultsPath := flag.String("results", "", "the suite's results file (required)")
	knownPath := flag.String("known", "hack/conformance/known-failures.txt", "the list of specs known not to pass")
	update := flag.Bool("update", false, "rewrite --known (and --docs) from the results instead of judging them")
	docsPath := flag.String("docs", "", "with --update: the Markdown file whose generated section lists the specs that do not pass")
	wall := flag.Int("wall", 0, "with --update: the run's wall time in seconds, for the docs")
	mustPass := flag.String("must-pass", `^\[sig-node\] NodeLease `, "specs matching this regular expression never go on the list")
	flag.Parse()
	if flag.NArg() > 0 || *resultsPath == "" {
		fmt.Fprintln(os.Stderr, "usage: ratchet --results FILE [--known FILE] [--update [--docs FILE] [--wall SECONDS]]")
		os.Exit(2)
	}
	gate, err := regexp.Compile(*mustPass)
	if err != nil {
		fail(fmt.Errorf("--must-pass: %w", err))
	}
	results, err := readResults(*resultsPath)
	if err != nil {
		fail(err)
	}
	var known Known
	if b, err := os.ReadFile(*knownPath); err == nil {
		if known, err = ParseKnown(string(b)); err != nil {
			fail(fmt.Errorf("%s: %w", *knownPath, err))
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		fail(err)
	}
	v := Judge(results, known, gate)
	v.Print(os.Stdout)
	if !*update {
		if len(v.Regressions) > 0 {
			os.Exit(1)
		}
		return
	}
	next := Update(known, results, gate)
	if err := os.WriteFile(*knownPath, []byte(next.Format()), 0o644); err != nil {
		fail(err)
	}
	fmt.Printf("\nwrote %s: %d specs known not to pass\n", *knownPath, next.Len())
	if *docsPath != "" {
		doc, err := os.ReadFile(*docsPath)
		if err != nil {
			fail(err)
		}
		out, err := ReplaceGenerated(string(doc), next.Markdown(v.Summary(*wall)))
		if err != nil {
			fail(fmt.Errorf("%s: %w", *docsPath, err))
		}
		if err := os.WriteFile(*docsPath, []byte(out), 0o644); err != nil {
			fail(err)
		}
		fmt.Printf("wrote %s\n", *docsPath)
	}
	// The new list takes every failure in, except those that must pass.
	if left := Judge(results, next, gate).Regressions; len(left) > 0 {
		fmt.Printf("\n%d of them must pass (--must-pass) and stay regressions\n", len(left))
		os.Exit(1)
	}
}

func fail(err error) {
	fmt.Fprintf(os.Stderr, "ratchet: %v\n", err)
	os.Exit(1)
}

func readResults(path string) ([]Result, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ParseResults(f)
}

// ParseResults reads one JSON Result per line.
func ParseResults(r io.Reader) ([]Result, error) {
	var out []Result
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for n := 1; sc.Scan(); n++ {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		var res Result
		if err := json.Unmarshal(line, &res); err != nil {
			return nil, fmt.Errorf("results line %d: %w", n, err)
		}
		if res.Name == "" || res.State == "" {
			return nil, fmt.Errorf("results line %d: name and state are required", n)
		}
		out = append(out, res)
	}
	return out, sc.Err()
}

// ParseKnown reads the list: comment lines ("#") before the first group are
// the header, "## title" starts a group, and every other non-empty line is
// "<spec name> | <reason>".
func ParseKnown(text string) (Known, error) {
	var k Known
	seen := map[string]int{}
	for i, line := range strings.Split(text, "\n") {
		n := i + 1
		line = strings.TrimRight(line, " \t\r")
		switch {
		case strings.HasPrefix(line, "## "):
			k.Groups = append(k.Groups, Group{Title: strings.TrimSpace(line[3:])})
		case line == "" && len(k.Groups) > 0:
		case strings.HasPrefix(line, "#") || line == "":
			if len(k.Groups) > 0 {
				continue // a comment inside the groups: not kept
			}
			k.Header = append(k.Header, line)
		default:
			if len(k.Groups) == 0 {
				return Known{}, fmt.Errorf("line %d: a spec before the first \"## group\" line", n)
			}
			name, reason, ok := strings.Cut(line, separator)
			name, reason = strings.TrimSpace(name), strings.TrimSpace(reason)
			if !ok || name == "" || reason == "" {
				return Known{}, fmt.Errorf("line %d: want \"<spec name>%s<reason>\", got %q", n, separator, line)
			}
			if prev, dup := seen[name]; dup {
				return Known{}, fmt.Errorf("line %d: %q is already listed on line %d", n, name, prev)
			}
			seen[name] = n
			g := &k.Groups[len(k.Groups)-1]
			g.Entries = append(g.Entries, Entry{Name: name, Reason: reason})
		}
	}
	for len(k.Header) > 0 && k.Header[len(k.Header)-1] == "" {
		k.Header = k.Header[:len(k.Header)-1]
	}
	return k, nil
}

// Len is the number of listed specs.
func (k Known) Len() int {
	n := 0
	for _, g := range k.Groups {
		n += len(g.Entries)
	}
	return n
}

func (k Known) lookup() map[string]Entry {
	m := map[string]Entry{}
	for _, g := range k.Groups {
		for _, e := range g.Entries {
			m[e.Name] = e
		}
	}
	return m
}

// Format writes the list back in the form ParseKnown reads; empty groups
// are left out.
func (k Known) Format() string {
	var b strings.Builder
	for _, h := range k.Header {
		b.WriteString(h + "\n")
	}
	for _, g := range k.Groups {
		if len(g.Entries) == 0 {
			continue
		}
		fmt.Fprintf(&b, "\n## %s\n", g.Title)
		for _, e := range g.Entries {
			b.WriteString(e.Name + separator + e.Reason + "\n")
		}
	}
	return b.String()
}

// passes is whether a state counts as passing.
func passes(state string) bool { return state == "passed" }

// Verdict is the outcome of a run judged against the list.
type Verdict struct {
	Results     []Result
	Known       map[string]bool // failing specs that are on the list
	Regressions []Result        // not passing and not on the list (or must pass)
	NowPassing  []string        // on the list and passed
}

// Judge compares a run with the list. A spec that does not pass (failed,
// timed out, panicked, skipped, ...) is a regression unless it is listed
// and does not match mustPass.
func Judge(results []Result, known Known, mustPass *regexp.Regexp) Verdict {
	listed := known.lookup()
	v := Verdict{Results: results, Known: map[string]bool{}}
	for _, r := range results {
		_, onList := listed[r.Name]
		gated := mustPass != nil && mustPass.MatchString(r.Name)
		switch {
		case passes(r.State) && onList:
			v.NowPassing = append(v.NowPassing, r.Name)
		case passes(r.State):
		case onList && !gated:
			v.Known[r.Name] = true
		default:
			v.Regressions = append(v.Regressions, r)
		}
	}
	return v
}

// Summary is one sentence about the run for the docs.
func (v Verdict) Summary(wallSeconds int) string {
	counts := map[string]int{}
	for _, r := range v.Results {
		counts[r.State]++
	}
	var states []string
	for s := range counts {
		if s != "passed" {
			states = append(states, s)
		}
	}
	sort.Strings(states)
	parts := []string{fmt.Sprintf("%d passed", counts["passed"])}
	for _, s := range states {
		parts = append(parts, fmt.Sprintf("%d %s", counts[s], s))
	}
	s := fmt.Sprintf("%s of %d specs", strings.Join(parts, ", "), len(v.Results))
	if wallSeconds > 0 {
		s += fmt.Sprintf("; the specs ran for %dm%02ds", wallSeconds/60, wallSeconds%60)
	}
	return s
}

// Print writes one line per spec, then the regressions and the specs that
// pass now.
func (v Verdict) Print(w io.Writer) {
	fmt.Fprintln(w, "\nconformance results:")
	for _, r := range v.Results {
		note := ""
		switch {
		case passes(r.State):
		case v.Known[r.Name]:
			note = " (known)"
		default:
			note = " (NOT ON THE LIST)"
		}
		fmt.Fprintf(w, "  %-8s %6.1fs  %s%s\n", strings.ToUpper(r.State), r.Seconds, r.Name, note)
	}
	fmt.Fprintf(w, "\n%s; %d known not to pass\n", v.Summary(0), len(v.Known))
	if len(v.NowPassing) > 0 {
		fmt.Fprintf(w, "\n%d listed specs pass now: remove them from hack/conformance/known-failures.txt (hack/conformance.sh --update-known-failures):\n", len(v.NowPassing))
		for _, n := range v.NowPassing {
			fmt.Fprintf(w, "  %s\n", n)
		}
	}
	if len(v.Regressions) > 0 {
		fmt.Fprintf(w, "\n%d specs do not pass and are not on the list (regressions):\n", len(v.Regressions))
		for _, r := range v.Regressions {
			fmt.Fprintf(w, "  %s %s\n", strings.ToUpper(r.State), r.Name)
			if r.Location != "" {
				fmt.Fprintf(w, "      at %s\n", r.Location)
			}
			if m := firstLine(r.Message); m != "" {
				fmt.Fprintf(w, "      %s\n", m)
			}
		}
	}
}

// Update returns the list after a run: listed specs that did not pass keep
// their place and reason, listed specs that passed leave, specs not in the
// run stay, and specs that did not pass and were not listed are added to
// the unclassified group (unless they match mustPass) with their failure
// message, shortened, as the reason.
func Update(known Known, results []Result, mustPass *regexp.Regexp) Known {
	state := map[string]Result{}
	for _, r := range results {
		state[r.Name] = r
	}
	next := Known{Header: known.Header}
	listed := map[string]bool{}
	for _, g := range known.Groups {
		ng := Group{Title: g.Title}
		for _, e := range g.Entries {
			listed[e.Name] = true
			r, ran := state[e.Name]
			if ran && (passes(r.State) || (mustPass != nil && mustPass.MatchString(e.Name))) {
				continue
			}
			ng.Entries = append(ng.Entries, e)
		}
		next.Groups = append(next.Groups, ng)
	}
	var added []Entry
	for _, r := range results {
		if passes(r.State) || listed[r.Name] || (mustPass != nil && mustPass.MatchString(r.Name)) {
			continue
		}
		reason := autoReason(r.Message)
		if reason == "" {
			reason = "no message"
		}
		if len(reason) > 300 {
			reason = reason[:300] + "..."
		}
		added = append(added, Entry{Name: r.Name, Reason: r.State + ": " + strings.ReplaceAll(reason, separator, " / ")})
	}
	if len(added) > 0 {
		sort.Slice(added, func(i, j int) bool { return added[i].Name < added[j].Name })
		i := -1
		for j, g := range next.Groups {
			if g.Title == unclassified {
				i = j
			}
		}
		if i < 0 {
			next.Groups = append(next.Groups, Group{Title: unclassified})
			i = len(next.Groups) - 1
		}
		next.Groups[i].Entries = append(next.Groups[i].Entries, added...)
	}
	return next
}

// autoReason shortens a failure message: its first two lines (the first is
// often just "Told to stop trying after 2.0s.") and, when it dumps a pod,
// the pod's status message (why the agent rejected or failed it).
func autoReason(msg string) string {
	lines := strings.Split(strings.TrimSpace(msg), "\n")
	head := lines[:min(2, len(lines))]
	reason := strings.Join(strings.Fields(strings.Join(head, " ")), " ")
	for _, l := range lines {
		if m, ok := strings.CutPrefix(strings.TrimSpace(l), "message: "); ok {
			reason += " (pod status message: " + strings.Trim(m, `"'`) + ")"
		}
	}
	return reason
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return strings.TrimSpace(s)
}

// The generated part of the docs lies between these lines.
const (
	beginMarker = "<!-- BEGIN known-failures: generated by hack/conformance.sh --update-known-failures -->"
	endMarker   = "<!-- END known-failures -->"
)

// Markdown lists the specs that do not pass, by group.
func (k Known) Markdown(summary string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Last regenerated from a run: %s. %d specs do not pass yet:\n", summary, k.Len())
	for _, g := range k.Groups {
		if len(g.Entries) == 0 {
			continue
		}
		fmt.Fprintf(&b, "\n### %s (%d)\n\n", g.Title, len(g.Entries))
		for _, e := range g.Entries {
			fmt.Fprintf(&b, "- %s — %s\n", mdEscape(e.Name), e.Reason)
		}
	}
	return b.String()
}

// mdEscape keeps a spec name literal in Markdown.
func mdEscape(s string) string {
	return "`" + strings.ReplaceAll(s, "`", "'") + "`"
}

// ReplaceGenerated puts section between the markers of doc.
func ReplaceGenerated(doc, section string) (string, error) {
	i := strings.Index(doc, beginMarker)
	j := strings.Index(doc, endMarker)
	if i < 0 || j < i {
		return "", fmt.Errorf("no %q ... %q section", beginMarker, endMarker)
	}
	return doc[:i] + beginMarker + "\n" + section + endMarker + doc[j+len(endMarker):], nil
}
