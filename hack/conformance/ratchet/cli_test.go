package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestMain lets a test run the command itself: with RATCHET_MAIN_ARGS set
// (one argument a line) the test binary is ratchet, so its exit status and
// what it writes are checked as hack/conformance.sh sees them.
func TestMain(m *testing.M) {
	if args := os.Getenv("RATCHET_MAIN_ARGS"); args != "" {
		os.Args = append([]string{"ratchet"}, strings.Split(args, "\n")...)
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// ratchet runs the command on the files in dir and returns its exit status
// and output.
func ratchet(t *testing.T, dir string, args ...string) (int, string) {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "RATCHET_MAIN_ARGS="+strings.Join(append([]string{
		"--results", "results.jsonl", "--known", "known-failures.txt",
		"--expected", "expected-specs.txt", "--timing", "timing-sensitive.txt",
	}, args...), "\n"))
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return 0, string(out)
	case errors.As(err, &exit):
		return exit.ExitCode(), string(out)
	default:
		t.Fatalf("running ratchet: %v", err)
		return 0, ""
	}
}

const cliKnown = `# specs known not to pass

## Probes
[sig-node] Probe a | no prober | failed: no prober

## Subordinate IDs
[sig-node] Skips | needs subordinate IDs | skipped: subordinate IDs
`

const cliExpected = `# expected
[sig-node] Other
[sig-node] Probe a
[sig-node] Skips
`

func writeFiles(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// The command's exit status for each way a run can go wrong: the ratchet
// fed a missing spec, a changed failure, a new pass and an unlisted retry
// must fail each time, and a run as recorded must pass.
func TestCommandExitStatus(t *testing.T) {
	const (
		other  = `{"name":"[sig-node] Other","state":"passed"}`
		probeA = `{"name":"[sig-node] Probe a","state":"failed","message":"no prober here"}`
		skips  = `{"name":"[sig-node] Skips","state":"skipped","message":"no subordinate IDs"}`
	)
	for _, tc := range []struct {
		desc    string
		results []string
		args    []string
		want    string
		exit    int
	}{
		{"as recorded", []string{other, probeA, skips}, []string{"--suite-exit", "1"}, "2 known not to pass", 0},
		{"an expected spec reported nothing", []string{other, skips}, nil, "1 expected specs reported nothing", 1},
		{"a listed spec fails differently", []string{other, skips, `{"name":"[sig-node] Probe a","state":"failed","message":"a new bug"}`},
			[]string{"--suite-exit", "1"}, "fails differently from its entry", 1},
		{"a listed spec passes", []string{other, skips, `{"name":"[sig-node] Probe a","state":"passed"}`}, nil, "1 listed specs pass now", 1},
		{"a spec not timing-sensitive passed on its second attempt", []string{`{"name":"[sig-node] Other","state":"passed","attempts":2}`, probeA, skips},
			[]string{"--suite-exit", "1"}, "not in timing-sensitive.txt", 1},
		{"the suite failed with no spec failing, only a listed skip", []string{other, skips}, []string{"--partial", "--suite-exit", "1"}, "although no spec failed", 1},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			dir := writeFiles(t, map[string]string{
				"results.jsonl": strings.Join(tc.results, "\n") + "\n", "known-failures.txt": cliKnown,
				"expected-specs.txt": cliExpected, "timing-sensitive.txt": "",
			})
			code, out := ratchet(t, dir, tc.args...)
			if code != tc.exit || !strings.Contains(out, tc.want) {
				t.Fatalf("exit status %d, want %d, and output with %q:\n%s", code, tc.exit, tc.want, out)
			}
		})
	}
}

// --update refuses to file a failure nobody classified: it exits 1 and
// leaves both lists as they were.
func TestCommandUpdateRefusesUnclassified(t *testing.T) {
	dir := writeFiles(t, map[string]string{
		"results.jsonl": `{"name":"[sig-node] Other","state":"passed"}` + "\n" +
			`{"name":"[sig-node] Probe a","state":"failed","message":"no prober"}` + "\n" +
			`{"name":"[sig-node] Skips","state":"skipped","message":"no subordinate IDs"}` + "\n" +
			`{"name":"[sig-node] New","state":"failed","message":"boom"}` + "\n",
		"known-failures.txt": cliKnown, "expected-specs.txt": cliExpected, "timing-sensitive.txt": "",
	})
	code, out := ratchet(t, dir, "--suite-exit", "1", "--update")
	if code != 1 || !strings.Contains(out, "not updating: 1 specs fail and are not classified") || !strings.Contains(out, "[sig-node] New") {
		t.Fatalf("exit status %d, want 1 and the unclassified spec named:\n%s", code, out)
	}
	for name, want := range map[string]string{"known-failures.txt": cliKnown, "expected-specs.txt": cliExpected} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if string(b) != want {
			t.Errorf("%s was rewritten:\n%s", name, b)
		}
	}
}
