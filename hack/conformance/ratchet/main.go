// Command ratchet judges a run of the upstream conformance specs
// (hack/conformance.sh) against three checked-in lists in hack/conformance/:
//
//   - known-failures.txt: the specs known not to pass yet, each with why and
//     with how it fails ("failed: <regexp over the failure message>", or "not
//     run" for a spec the suite's selection leaves out);
//
//   - expected-specs.txt: every spec a full run must report;
//
//   - timing-sensitive.txt: the specs that may pass on a second attempt
//     (ginkgo --flake-attempts), each with why.
//
//     ratchet --results FILE [--known FILE] [--expected FILE] [--timing FILE]
//     [--suite-exit N] [--partial] [--update --docs FILE --wall SECONDS]
//
// It prints one line per spec (PASSED, FAILED, SKIPPED, ... with its time and
// attempts), then everything that fails the run (exit status 1):
//   - a spec that does not pass and is not listed (a regression);
//   - a listed spec that fails differently from its recorded expectation;
//   - a listed spec that passes now (until its entry is removed);
//   - an expected spec that did not report at all (renamed, silently skipped,
//     or lost with a crashed ginkgo process), unless --partial (a --focus run);
//   - a spec that passed only on a later attempt and is not timing-sensitive;
//   - a suite that exited non-zero although no spec failed (a skip, listed
//     or not, does not explain a non-zero exit).
//
// Every retry is counted in the output.
//
// With --update it rewrites the lists from the run instead: listed specs that
// still fail as recorded keep their entry, passing ones leave, and
// expected-specs.txt becomes the set of specs that ran. It refuses to file a
// failure that is not classified yet: such a spec must be added by hand with
// its group, reason and expectation. It also rewrites the generated part of
// --docs (docs/conformance.md). Specs matching --must-pass (the NodeLease
// specs) never go on the list: they always gate.
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
	"slices"
	"sort"
	"strings"
)

// Result is one spec's outcome.
type Result struct {
	Name     string   `json:"name"`
	State    string   `json:"state"`
	Seconds  float64  `json:"seconds"`
	Attempts int      `json:"attempts,omitempty"` // ginkgo's NumAttempts; 0 or 1: the first attempt decided
	Message  string   `json:"message,omitempty"`
	Location string   `json:"location,omitempty"`
	Earlier  []string `json:"earlier,omitempty"` // the failures of the attempts before the last
}

// Expectation is how a listed spec is known to fail.
type Expectation struct {
	NotRun  bool           // the suite's selection leaves the spec out
	State   string         // failed, timedout, skipped, ...
	Pattern *regexp.Regexp // must match the failure message
}

// notRun is the expectation of a spec the suite does not run.
const notRun = "not run"

// ParseExpectation reads "not run" or "<state>: <regexp>".
func ParseExpectation(s string) (Expectation, error) {
	s = strings.TrimSpace(s)
	if s == notRun {
		return Expectation{NotRun: true}, nil
	}
	state, pat, ok := strings.Cut(s, ":")
	state, pat = strings.TrimSpace(state), strings.TrimSpace(pat)
	if !ok || state == "" || pat == "" || strings.ContainsAny(state, " \t") {
		return Expectation{}, fmt.Errorf("want %q or \"<state>: <regexp over the failure message>\", got %q", notRun, s)
	}
	if passes(state) {
		return Expectation{}, fmt.Errorf("a listed spec cannot be expected to pass")
	}
	re, err := regexp.Compile(pat)
	if err != nil {
		return Expectation{}, err
	}
	return Expectation{State: state, Pattern: re}, nil
}

func (e Expectation) String() string {
	if e.NotRun {
		return notRun
	}
	return e.State + ": " + e.Pattern.String()
}

// Matches reports whether a result is the recorded failure.
func (e Expectation) Matches(r Result) bool {
	return !e.NotRun && r.State == e.State && e.Pattern.MatchString(r.Message)
}

// Entry is a spec on the list, with why it does not pass and how it fails.
type Entry struct {
	Name   string
	Reason string
	Expect Expectation
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

// separator splits a spec line into its fields.
const separator = " | "

func main() {
	resultsPath := flag.String("results", "", "the suite's results file (required)")
	knownPath := flag.String("known", "hack/conformance/known-failures.txt", "the list of specs known not to pass")
	expectedPath := flag.String("expected", "hack/conformance/expected-specs.txt", "the specs a full run must report")
	timingPath := flag.String("timing", "hack/conformance/timing-sensitive.txt", "the specs that may pass on a later attempt")
	suiteExit := flag.Int("suite-exit", 0, "the ginkgo CLI's exit status")
	partial := flag.Bool("partial", false, "the run selected some specs only (--focus): do not require every expected spec")
	update := flag.Bool("update", false, "rewrite --known, --expected (and --docs) from the results instead of judging them")
	docsPath := flag.String("docs", "", "with --update: the Markdown file whose generated section lists the specs that do not pass")
	wall := flag.Int("wall", 0, "with --update: the run's wall time in seconds, for the docs")
	section := flag.String("docs-section", "known-failures", "with --docs: the name of the generated section (one per set of specs)")
	mustPass := flag.String("must-pass", `^\[sig-node\] NodeLease `, "specs matching this regular expression never go on the list")
	flag.Parse()
	if flag.NArg() > 0 || *resultsPath == "" {
		fmt.Fprintln(os.Stderr, "usage: ratchet --results FILE [--known FILE] [--expected FILE] [--timing FILE] [--suite-exit N] [--partial] [--update [--docs FILE] [--wall SECONDS]]")
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
	timing := map[string]string{}
	if b, err := os.ReadFile(*timingPath); err == nil {
		if timing, err = ParseTiming(string(b)); err != nil {
			fail(fmt.Errorf("%s: %w", *timingPath, err))
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		fail(err)
	}
	expectedHeader := []string{"# Every spec a full run of hack/conformance.sh reports, one name a line.",
		"# The ratchet fails when one of them reports nothing (renamed, silently skipped,",
		"# or lost with a crashed ginkgo process). Regenerated by",
		"# hack/conformance.sh --update-known-failures."}
	// A set's first runs have no list yet: an --update run writes it, and a
	// --partial run (a --focus part of the set) requires no expected spec.
	expected, err := readExpected(*expectedPath, *update || *partial)
	if err != nil {
		fail(fmt.Errorf("the expected specs: %w", err))
	}
	in := Inputs{Known: known, Timing: timing, Expected: expected, Partial: *partial, SuiteExit: *suiteExit, MustPass: gate}
	v := Judge(results, in)
	v.Print(os.Stdout)
	if !*update {
		if v.Failed() {
			os.Exit(1)
		}
		return
	}
	next, unclassified := Update(known, results, gate)
	if len(unclassified) > 0 {
		fmt.Printf("\nnot updating: %d specs fail and are not classified; add each to %s by hand, under the group of the capability it needs, as \"<spec name> | <why> | <state>: <regexp over its failure message>\":\n", len(unclassified), *knownPath)
		for _, r := range unclassified {
			fmt.Printf("  %s %s\n      %s\n", strings.ToUpper(r.State), r.Name, autoReason(r.Message))
		}
		os.Exit(1)
	}
	if err := os.WriteFile(*knownPath, []byte(next.Format()), 0o644); err != nil {
		fail(err)
	}
	fmt.Printf("\nwrote %s: %d specs known not to pass\n", *knownPath, next.Len())
	if !*partial {
		var names []string
		for _, r := range results {
			names = append(names, r.Name)
		}
		if err := os.WriteFile(*expectedPath, []byte(FormatExpected(expectedHeader, names)), 0o644); err != nil {
			fail(err)
		}
		fmt.Printf("wrote %s: %d specs\n", *expectedPath, len(names))
	}
	if *docsPath != "" {
		doc, err := os.ReadFile(*docsPath)
		if err != nil {
			fail(err)
		}
		out, err := ReplaceGenerated(string(doc), *section, next.Markdown(v.Summary(*wall)))
		if err != nil {
			fail(fmt.Errorf("%s: %w", *docsPath, err))
		}
		if err := os.WriteFile(*docsPath, []byte(out), 0o644); err != nil {
			fail(err)
		}
		fmt.Printf("wrote %s\n", *docsPath)
	}
	// What the update cannot take in still fails the run.
	in.Known = next
	if left := Judge(results, in); left.Failed() {
		fmt.Println("\nthe run still fails after the update (see above)")
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
// "<spec name> | <reason> | <expectation>".
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
			fields := strings.Split(line, separator)
			if len(fields) != 3 {
				return Known{}, fmt.Errorf("line %d: want \"<spec name>%s<reason>%s<expectation>\", got %q", n, separator, separator, line)
			}
			name, reason := strings.TrimSpace(fields[0]), strings.TrimSpace(fields[1])
			if name == "" || reason == "" {
				return Known{}, fmt.Errorf("line %d: want \"<spec name>%s<reason>%s<expectation>\", got %q", n, separator, separator, line)
			}
			exp, err := ParseExpectation(fields[2])
			if err != nil {
				return Known{}, fmt.Errorf("line %d: the expectation: %w", n, err)
			}
			if prev, dup := seen[name]; dup {
				return Known{}, fmt.Errorf("line %d: %q is already listed on line %d", n, name, prev)
			}
			seen[name] = n
			g := &k.Groups[len(k.Groups)-1]
			g.Entries = append(g.Entries, Entry{Name: name, Reason: reason, Expect: exp})
		}
	}
	for len(k.Header) > 0 && k.Header[len(k.Header)-1] == "" {
		k.Header = k.Header[:len(k.Header)-1]
	}
	return k, nil
}

// ParseTiming reads timing-sensitive.txt: "#" comments and
// "<spec name> | <why>" lines.
func ParseTiming(text string) (map[string]string, error) {
	out := map[string]string{}
	for i, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, why, ok := strings.Cut(line, separator)
		name, why = strings.TrimSpace(name), strings.TrimSpace(why)
		if !ok || name == "" || why == "" {
			return nil, fmt.Errorf("line %d: want \"<spec name>%s<why it may need a second attempt>\", got %q", i+1, separator, line)
		}
		if _, dup := out[name]; dup {
			return nil, fmt.Errorf("line %d: %q is listed twice", i+1, name)
		}
		out[name] = why
	}
	return out, nil
}

// readExpected reads the expected-specs file at path; a missing one is no
// expected spec if mayBeMissing, an error otherwise.
func readExpected(path string, mayBeMissing bool) ([]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) && mayBeMissing {
			return nil, nil
		}
		return nil, err
	}
	return ParseExpected(string(b)), nil
}

// ParseExpected reads expected-specs.txt: one spec name a line, "#" comments.
func ParseExpected(text string) []string {
	var out []string
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line != "" && !strings.HasPrefix(line, "#") {
			out = append(out, line)
		}
	}
	return out
}

// FormatExpected writes the names sorted, after the header.
func FormatExpected(header, names []string) string {
	names = slices.Clone(names)
	slices.Sort(names)
	names = slices.Compact(names)
	return strings.Join(header, "\n") + "\n" + strings.Join(names, "\n") + "\n"
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
			b.WriteString(e.Name + separator + e.Reason + separator + e.Expect.String() + "\n")
		}
	}
	return b.String()
}

// passes is whether a state counts as passing.
func passes(state string) bool { return state == "passed" }

// failsSuite is whether a spec in this state makes ginkgo exit non-zero: a
// skipped or pending spec does not, so it cannot explain a failed suite.
func failsSuite(state string) bool {
	return !passes(state) && state != "skipped" && state != "pending"
}

// Inputs is what a run is judged against.
type Inputs struct {
	Known     Known
	Timing    map[string]string // timing-sensitive specs: may pass on a later attempt
	Expected  []string          // every spec a full run reports
	Partial   bool              // a --focus run: Expected is not required
	SuiteExit int               // the ginkgo CLI's exit status
	MustPass  *regexp.Regexp    // never accepted as failing
}

// Problem is a spec that fails the run, with why.
type Problem struct {
	Result
	Why string
}

// Verdict is the outcome of a run judged against the lists.
type Verdict struct {
	Results     []Result
	Known       map[string]bool // failing specs that fail as listed
	Regressions []Problem       // fail the run
	NowPassing  []string        // on the list and passed: fail the run until removed
	Missing     []string        // expected and not reported: fail the run
	Retried     []Result        // timing-sensitive specs that passed on a later attempt
	Suite       string          // the suite failed outside the specs
}

// Failed reports whether the run fails.
func (v Verdict) Failed() bool {
	return len(v.Regressions) > 0 || len(v.NowPassing) > 0 || len(v.Missing) > 0 || v.Suite != ""
}

// Judge compares a run with the lists.
func Judge(results []Result, in Inputs) Verdict {
	listed := in.Known.lookup()
	v := Verdict{Results: results, Known: map[string]bool{}}
	reported := map[string]bool{}
	anyFailed := false // a spec failed, so a non-zero suite exit is explained
	for _, r := range results {
		reported[r.Name] = true
		e, onList := listed[r.Name]
		gated := in.MustPass != nil && in.MustPass.MatchString(r.Name)
		_, timingSensitive := in.Timing[r.Name]
		if failsSuite(r.State) {
			anyFailed = true
		}
		switch {
		case passes(r.State) && onList:
			v.NowPassing = append(v.NowPassing, r.Name)
		case passes(r.State) && r.Attempts > 1 && !timingSensitive:
			v.Regressions = append(v.Regressions, Problem{r, fmt.Sprintf("passed only on attempt %d, and is not in timing-sensitive.txt", r.Attempts)})
		case passes(r.State) && r.Attempts > 1:
			v.Retried = append(v.Retried, r)
		case passes(r.State):
		case gated:
			v.Regressions = append(v.Regressions, Problem{r, "must pass"})
		case !onList:
			v.Regressions = append(v.Regressions, Problem{r, "not on the list"})
		case e.Expect.NotRun:
			v.Regressions = append(v.Regressions, Problem{r, "listed as not run, but it ran"})
		case !e.Expect.Matches(r):
			v.Regressions = append(v.Regressions, Problem{r, "fails differently from its entry (" + e.Expect.String() + ")"})
		default:
			v.Known[r.Name] = true
		}
	}
	if !in.Partial {
		for _, n := range in.Expected {
			if !reported[n] {
				v.Missing = append(v.Missing, n)
			}
		}
	}
	if in.SuiteExit != 0 && !anyFailed {
		v.Suite = fmt.Sprintf("the suite exited with status %d although no spec failed: a ginkgo process crashed or the suite failed outside the specs", in.SuiteExit)
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
	if len(v.Retried) > 0 {
		s += fmt.Sprintf(" (%d passed on a second attempt)", len(v.Retried))
	}
	if wallSeconds > 0 {
		s += fmt.Sprintf("; the specs ran for %dm%02ds", wallSeconds/60, wallSeconds%60)
	}
	return s
}

// Print writes one line per spec, then what fails the run.
func (v Verdict) Print(w io.Writer) {
	fmt.Fprintln(w, "\nconformance results:")
	bad := map[string]bool{}
	for _, p := range v.Regressions {
		bad[p.Name] = true
	}
	for _, r := range v.Results {
		note := ""
		switch {
		case bad[r.Name]:
			note = " (FAILS THE RUN)"
		case passes(r.State) && r.Attempts > 1:
			note = fmt.Sprintf(" (attempt %d: timing-sensitive)", r.Attempts)
		case passes(r.State):
		case v.Known[r.Name]:
			note = " (known)"
		}
		fmt.Fprintf(w, "  %-8s %6.1fs  %s%s\n", strings.ToUpper(r.State), r.Seconds, r.Name, note)
	}
	fmt.Fprintf(w, "\n%s; %d known not to pass; %d retried\n", v.Summary(0), len(v.Known), len(v.Retried))
	if len(v.Retried) > 0 {
		fmt.Fprintf(w, "\n%d timing-sensitive specs passed on a later attempt:\n", len(v.Retried))
		for _, r := range v.Retried {
			fmt.Fprintf(w, "  attempt %d: %s\n", r.Attempts, r.Name)
			printEarlier(w, r.Earlier)
		}
	}
	if len(v.NowPassing) > 0 {
		fmt.Fprintf(w, "\n%d listed specs pass now: remove them from hack/conformance/known-failures.txt (hack/conformance.sh --update-known-failures):\n", len(v.NowPassing))
		for _, n := range v.NowPassing {
			fmt.Fprintf(w, "  %s\n", n)
		}
	}
	if len(v.Missing) > 0 {
		fmt.Fprintf(w, "\n%d expected specs reported nothing (renamed, silently skipped, or lost with a crashed process; a new pin: hack/conformance.sh --update-known-failures):\n", len(v.Missing))
		for _, n := range v.Missing {
			fmt.Fprintf(w, "  %s\n", n)
		}
	}
	if len(v.Regressions) > 0 {
		fmt.Fprintf(w, "\n%d specs fail the run:\n", len(v.Regressions))
		for _, p := range v.Regressions {
			fmt.Fprintf(w, "  %s %s\n      %s\n", strings.ToUpper(p.State), p.Name, p.Why)
			if p.Location != "" {
				fmt.Fprintf(w, "      at %s\n", p.Location)
			}
			if m := firstLine(p.Message); m != "" {
				fmt.Fprintf(w, "      %s\n", m)
			}
			printEarlier(w, p.Earlier)
		}
	}
	if v.Suite != "" {
		fmt.Fprintf(w, "\n%s\n", v.Suite)
	}
}

// printEarlier writes why the earlier attempts of a retried spec failed:
// the first lines of each message and where it failed.
func printEarlier(w io.Writer, earlier []string) {
	for _, e := range earlier {
		lines := strings.Split(strings.TrimSpace(e), "\n")
		if len(lines) > 8 {
			lines = append(lines[:6], "...", lines[len(lines)-1])
		}
		fmt.Fprintf(w, "      earlier attempt: %s\n", strings.Join(lines, "\n        "))
	}
}

// Update returns the list after a run: listed specs that did not pass keep
// their place, reason and expectation, listed specs that passed leave, specs
// not in the run stay; specs that did not pass and are not listed (and may
// be listed at all) are returned apart, unclassified: a person must say why.
func Update(known Known, results []Result, mustPass *regexp.Regexp) (Known, []Result) {
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
	var unclassified []Result
	for _, r := range results {
		if passes(r.State) || listed[r.Name] || (mustPass != nil && mustPass.MatchString(r.Name)) {
			continue
		}
		unclassified = append(unclassified, r)
	}
	sort.Slice(unclassified, func(i, j int) bool { return unclassified[i].Name < unclassified[j].Name })
	return next, unclassified
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

// The generated part of the docs named section lies between these lines.
func markers(section string) (begin, end string) {
	return "<!-- BEGIN " + section + ": generated by hack/conformance.sh --update-known-failures -->",
		"<!-- END " + section + " -->"
}

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

// ReplaceGenerated puts text between the markers of the named section of
// doc.
func ReplaceGenerated(doc, name, text string) (string, error) {
	beginMarker, endMarker := markers(name)
	i := strings.Index(doc, beginMarker)
	j := strings.Index(doc, endMarker)
	if i < 0 || j < i {
		return "", fmt.Errorf("no %q ... %q section", beginMarker, endMarker)
	}
	return doc[:i] + beginMarker + "\n" + text + endMarker + doc[j+len(endMarker):], nil
}
