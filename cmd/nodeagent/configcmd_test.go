package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const cfgHeader = "apiVersion: config.nodeagent.io/v1alpha1\nkind: NodeAgentConfiguration\n"

func writeCfg(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func runConfig(args ...string) (int, string, string) {
	var stdout, stderr bytes.Buffer
	code := runConfigCommand(args, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

func TestConfigValidate(t *testing.T) {
	dir := t.TempDir()
	good := writeCfg(t, dir, "good.yaml", cfgHeader+"maxPods: 50\n")
	bad := writeCfg(t, dir, "bad.yaml", cfgHeader+"maxpods: 50\nhealthzPort: x\n")
	invalid := writeCfg(t, dir, "invalid.yaml", cfgHeader+"nodeLeaseDurationSeconds: -1\nmaxPods: 0\n")
	slow := writeCfg(t, dir, "slow.yaml", cfgHeader+"nodeLeaseDurationSeconds: 200\n")
	dropIns := filepath.Join(dir, "d")
	writeCfg(t, dropIns, "10.conf", cfgHeader+"maxPods: -3\n")

	for _, tc := range []struct {
		desc        string
		args        []string
		code        int
		stdout      []string
		stderr      []string
		notStderr   []string
		emptyStdout bool
	}{
		{desc: "valid", args: []string{"validate", "--config", good}, code: 0, stdout: []string{good + ": valid (1 files read)"}},
		{desc: "valid, positional", args: []string{"validate", good}, code: 0, stdout: []string{good + ": valid"}},
		{
			desc: "decoding errors, all at once", args: []string{"validate", "--config", bad}, code: 1, emptyStdout: true,
			stderr: []string{
				"error: " + bad + `:4: healthzPort: Invalid value: "x": must be an integer`,
				"error: " + bad + `:3: maxpods: unknown field (did you mean "maxPods"?)`,
				"configuration is invalid: 2 error(s)",
			},
		},
		{
			desc: "validation errors, all at once", args: []string{"validate", "--config", invalid}, code: 1,
			stderr: []string{
				"error: " + invalid + ":3: nodeLeaseDurationSeconds: Invalid value: -1: must be greater than 0",
				"error: " + invalid + ":4: maxPods: Invalid value: 0: must be greater than 0",
			},
		},
		{
			desc: "a bad drop-in is named", args: []string{"validate", "--config", good, "--config-dir", dropIns}, code: 1,
			stderr: []string{"error: " + filepath.Join(dropIns, "10.conf") + ":3: maxPods: Invalid value: -3: must be greater than 0"},
		},
		{
			desc: "warnings do not fail", args: []string{"validate", "--config", slow}, code: 0,
			stderr: []string{"warning: nodeLeaseDurationSeconds: 200 means the Lease is renewed every 50s"},
		},
		{
			desc: "kubelet configuration", args: []string{"validate", "--config", "../../config/testdata/kubelet-config.yaml"}, code: 0,
			// kubeadm's file: every field is used or changes nothing.
			stderr:    []string{"warning: healthzPort: 10248 is the kubelet healthz port"},
			notStderr: []string{"ignoring KubeletConfiguration fields"},
		},
		{desc: "missing file", args: []string{"validate", "--config", filepath.Join(dir, "nope")}, code: 1, stderr: []string{"no such file or directory"}},
		{desc: "no file", args: []string{"validate"}, code: 2, stderr: []string{"--config FILE or --config-dir DIR is required"}},
		{desc: "unknown flag", args: []string{"validate", "--cofnig", good}, code: 2, stderr: []string{"flag provided but not defined: -cofnig"}},
		{desc: "unknown command", args: []string{"check"}, code: 2, stderr: []string{`unknown command "check"`, "Usage:"}},
		{desc: "no command", args: nil, code: 2, stderr: []string{"Usage:"}},
		{desc: "defaults takes no arguments", args: []string{"defaults", "x"}, code: 2},
		{desc: "bad -v", args: []string{"effective", "-v", "x"}, code: 2, stderr: []string{`invalid value "x" for flag -v`}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			code, stdout, stderr := runConfig(tc.args...)
			if code != tc.code {
				t.Errorf("exit code %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tc.code, stdout, stderr)
			}
			for _, w := range tc.stdout {
				if !strings.Contains(stdout, w) {
					t.Errorf("stdout lacks %q:\n%s", w, stdout)
				}
			}
			for _, w := range tc.stderr {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr lacks %q:\n%s", w, stderr)
				}
			}
			for _, w := range tc.notStderr {
				if strings.Contains(stderr, w) {
					t.Errorf("stderr has %q:\n%s", w, stderr)
				}
			}
			if tc.emptyStdout && stdout != "" {
				t.Errorf("stdout not empty: %s", stdout)
			}
		})
	}
}

func TestConfigDefaultsValidates(t *testing.T) {
	code, out, stderr := runConfig("defaults")
	if code != 0 || stderr != "" {
		t.Fatalf("config defaults: exit %d, stderr %s", code, stderr)
	}
	p := writeCfg(t, t.TempDir(), "defaults.yaml", out)
	if code, _, stderr := runConfig("validate", p); code != 0 || stderr != "" {
		t.Errorf("config validate of the defaults: exit %d, stderr:\n%s", code, stderr)
	}
	// Round trip: the effective configuration of the defaults file is the
	// defaults file, apart from comments.
	code, eff, stderr := runConfig("effective", "--config", p)
	if code != 0 {
		t.Fatalf("config effective: exit %d, stderr %s", code, stderr)
	}
	if stripComments(eff) != stripComments(out) {
		t.Errorf("effective configuration of the defaults differs:\n%s\nwant\n%s", stripComments(eff), stripComments(out))
	}
}

func TestConfigEffective(t *testing.T) {
	dir := t.TempDir()
	p := writeCfg(t, dir, "config.yaml", cfgHeader+"maxPods: 50\nkubeconfig: /etc/file/kubeconfig\n")
	writeCfg(t, dir, "d/10-lease.conf", cfgHeader+"nodeLeaseDurationSeconds: 60\n")
	code, out, stderr := runConfig("effective", "--config", p, "--config-dir", filepath.Join(dir, "d"),
		"--kubeconfig", "/etc/flag/kubeconfig", "--hostname-override", "node-7", "--node-ip", "192.0.2.7", "-v", "4")
	if code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr)
	}
	for _, want := range []string{
		"# from " + filepath.Join(dir, "d/10-lease.conf") + "\nnodeLeaseDurationSeconds: 60\n",
		"# from " + p + "\nmaxPods: 50\n",
		"# from flag --kubeconfig\nkubeconfig: /etc/flag/kubeconfig\n",
		"# from flag --hostname-override\nhostnameOverride: node-7\n",
		"# from flag --node-ip\nnodeIP: 192.0.2.7\n",
		"  # from flag -v\n  verbosity: 4\n",
		"nodeStatusUpdateFrequency: 10s\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("effective configuration lacks %q:\n%s", want, out)
		}
	}
	// The output is itself a valid configuration.
	e := writeCfg(t, dir, "effective.yaml", out)
	if code, _, stderr := runConfig("validate", e); code != 0 {
		t.Errorf("effective output does not validate: %s", stderr)
	}
}

func stripComments(s string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if t := strings.TrimSpace(l); t == "" || strings.HasPrefix(t, "#") {
			continue
		}
		out = append(out, l)
	}
	return strings.Join(out, "\n")
}
