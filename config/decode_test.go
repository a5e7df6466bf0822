package config

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

const hdr = "apiVersion: config.nodeagent.io/v1alpha1\nkind: NodeAgentConfiguration\n"

func writeFile(t *testing.T, dir, name, content string) string {
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

// problemLines returns the lines of a *config.Error, failing otherwise.
func problemLines(t *testing.T, err error) []string {
	t.Helper()
	var ce *Error
	if !errors.As(err, &ce) {
		t.Fatalf("error %v (%T) is not a *config.Error", err, err)
	}
	return ce.Lines()
}

func TestDecodeErrors(t *testing.T) {
	for _, tc := range []struct {
		desc    string
		content string
		want    []string // each a full problem line after "FILE:" ("LINE: field: detail") or "FILE: "
	}{
		{
			desc:    "unknown field with suggestion",
			content: hdr + "maxpods: 3\n",
			want:    []string{`3: maxpods: unknown field (did you mean "maxPods"?)`},
		},
		{
			desc:    "wrongly cased field",
			content: hdr + "NodeLeaseDurationSeconds: 40\n",
			want:    []string{`3: NodeLeaseDurationSeconds: unknown field (did you mean "nodeLeaseDurationSeconds"?)`},
		},
		{
			desc:    "nested unknown field",
			content: hdr + "pleg:\n  relistPeriodd: 5m\n",
			want:    []string{`4: pleg.relistPeriodd: unknown field (did you mean "relistPeriod"?)`},
		},
		{
			desc:    "unknown field without suggestion",
			content: hdr + "frobnicate: true\n",
			want:    []string{`3: frobnicate: unknown field`},
		},
		{
			desc:    "unknown field inside a taint",
			content: hdr + "registerWithTaints:\n- key: a\n  effect: NoSchedule\n  colour: red\n",
			want:    []string{`6: registerWithTaints[0].colour: unknown field`},
		},
		{
			desc:    "string for an integer",
			content: hdr + "healthzPort: x\n",
			want:    []string{`3: healthzPort: Invalid value: "x": must be an integer`},
		},
		{
			desc:    "fraction for an integer",
			content: hdr + "maxPods: 1.5\n",
			want:    []string{`3: maxPods: Invalid value: 1.5: must be an integer`},
		},
		{
			desc:    "integer out of range",
			content: hdr + "nodeLeaseDurationSeconds: 9999999999\n",
			want:    []string{`3: nodeLeaseDurationSeconds: Invalid value: 9999999999: out of range for a 32-bit integer`},
		},
		{
			desc:    "number for a duration",
			content: hdr + "nodeStatusUpdateFrequency: 10\n",
			want:    []string{`3: nodeStatusUpdateFrequency: Invalid value: 10: must be a duration string such as "10s", "5m" or "1h30m"`},
		},
		{
			desc:    "bad duration",
			content: hdr + "pleg:\n  healthThreshold: 3 minutes\n",
			want:    []string{`4: pleg.healthThreshold: Invalid value: "3 minutes": must be a duration such as "10s", "5m" or "1h30m"`},
		},
		{
			desc:    "number in a string map",
			content: hdr + "systemReserved:\n  cpu: 1\n",
			want:    []string{`4: systemReserved[cpu]: Invalid value: 1: must be a string (quote it: "1")`},
		},
		{
			desc:    "unquoted yes in a string map",
			content: hdr + "nodeLabels:\n  example.com/on: yes\n",
			want:    []string{`4: nodeLabels[example.com/on]: Invalid value: true: must be a string; YAML reads unquoted yes, no, on, off, true and false as booleans: quote the value`},
		},
		{
			desc:    "list for a string",
			content: hdr + "providerID: [a]\n",
			want:    []string{`3: providerID: Invalid value: "[\"a\"]": must be a string`},
		},
		{
			desc:    "scalar for a map",
			content: hdr + "nodeLabels: a=b\n",
			want:    []string{`3: nodeLabels: Invalid value: "a=b": must be a mapping (object)`},
		},
		{
			desc:    "map for a list",
			content: hdr + "pleg:\n  eventSources: {a: b}\n",
			want:    []string{`4: pleg.eventSources: Invalid value: "{\"a\":\"b\"}": must be a list`},
		},
		{
			desc:    "every problem at once",
			content: hdr + "maxpods: 3\nhealthzPort: x\npleg:\n  relistPeriod: 5\n",
			want: []string{
				`4: healthzPort: Invalid value: "x": must be an integer`,
				`3: maxpods: unknown field (did you mean "maxPods"?)`,
				`6: pleg.relistPeriod: Invalid value: 5: must be a duration string such as "10s", "5m" or "1h30m"`,
			},
		},
		{
			desc:    "duplicate key",
			content: hdr + "maxPods: 10\nmaxPods: 20\n",
			want:    []string{`YAML error: line 4: key "maxPods" already set in map`},
		},
		{
			desc:    "syntax error with line",
			content: hdr + "maxPods: 10\n  healthzPort: 1\n",
			want:    []string{`YAML syntax error: line 4: mapping values are not allowed in this context`},
		},
		{
			desc:    "tab indentation",
			content: hdr + "pleg:\n\trelistPeriod: 5m\n",
			want:    []string{`YAML syntax error: line 4: found character that cannot start any token`},
		},
		{
			desc:    "missing apiVersion and kind",
			content: "maxPods: 10\n",
			want: []string{
				`apiVersion: Required value: must be config.nodeagent.io/v1alpha1 (or kubelet.config.k8s.io/v1beta1)`,
				`kind: Required value: must be NodeAgentConfiguration`,
			},
		},
		{
			desc:    "wrong apiVersion",
			content: "apiVersion: config.nodeagent.io/v1\nkind: NodeAgentConfiguration\n",
			want:    []string{`1: apiVersion: Unsupported value: "config.nodeagent.io/v1": supported values: "config.nodeagent.io/v1alpha1", "kubelet.config.k8s.io/v1beta1"`},
		},
		{
			desc:    "wrong kind",
			content: "apiVersion: config.nodeagent.io/v1alpha1\nkind: KubeletConfiguration\n",
			want:    []string{`2: kind: Unsupported value: "KubeletConfiguration": supported values: "NodeAgentConfiguration"`},
		},
		{
			desc:    "kubelet apiVersion with our kind",
			content: "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: NodeAgentConfiguration\n",
			want:    []string{`2: kind: Unsupported value: "NodeAgentConfiguration": supported values: "KubeletConfiguration"`},
		},
		{
			desc:    "non-string kind",
			content: "apiVersion: config.nodeagent.io/v1alpha1\nkind: 3\n",
			want:    []string{`2: kind: Invalid value: 3: must be a string`},
		},
		{
			desc:    "empty file",
			content: "",
			want:    []string{`file is empty; a configuration needs at least apiVersion: config.nodeagent.io/v1alpha1 and kind: NodeAgentConfiguration`},
		},
		{
			desc:    "only comments",
			content: "# nothing here\n---\n",
			want:    []string{`file is empty; a configuration needs at least apiVersion: config.nodeagent.io/v1alpha1 and kind: NodeAgentConfiguration`},
		},
		{
			desc:    "two documents",
			content: hdr + "---\n" + hdr,
			want:    []string{`found 2 YAML documents; a configuration file holds exactly one`},
		},
		{
			desc:    "a list at the top",
			content: "- a\n- b\n",
			want:    []string{`the top level must be a mapping with apiVersion and kind, found a list`},
		},
		{
			desc:    "unknown field in a KubeletConfiguration",
			content: "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nmaxPod: 3\n",
			want:    []string{`3: maxPod: unknown field (did you mean "maxPods"?)`},
		},
		{
			desc:    "wrong type in an unsupported KubeletConfiguration field",
			content: "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nserializeImagePulls: maybe\n",
			want:    []string{`3: serializeImagePulls: Invalid value: "maybe": must be a boolean (true or false)`},
		},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			p := writeFile(t, t.TempDir(), "config.yaml", tc.content)
			cfg, _, err := Load(LoadOptions{Path: p})
			if err == nil {
				t.Fatalf("Load succeeded with %+v, want errors %q", cfg, tc.want)
			}
			got := problemLines(t, err)
			var want []string
			for _, w := range tc.want {
				if w != "" && w[0] >= '0' && w[0] <= '9' { // "LINE: ..."
					want = append(want, p+":"+w)
				} else {
					want = append(want, p+": "+w)
				}
			}
			if strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
		})
	}
}

func TestLoadPathErrors(t *testing.T) {
	dir := t.TempDir()
	loop := filepath.Join(dir, "loop.yaml")
	if err := os.Symlink(loop, loop); err != nil {
		t.Fatal(err)
	}
	file := writeFile(t, dir, "file.yaml", hdr)
	for _, tc := range []struct {
		desc   string
		o      LoadOptions
		want   string
		errIs  error
		asRoot bool
	}{
		{desc: "missing file", o: LoadOptions{Path: filepath.Join(dir, "nope.yaml")}, want: filepath.Join(dir, "nope.yaml") + ": cannot read: no such file or directory", errIs: fs.ErrNotExist},
		{desc: "directory", o: LoadOptions{Path: dir}, want: dir + ": is a directory, not a configuration file"},
		{desc: "symlink loop", o: LoadOptions{Path: loop}, want: loop + ": cannot read: too many levels of symbolic links"},
		{desc: "missing drop-in dir", o: LoadOptions{Path: file, DropInDir: filepath.Join(dir, "nodir")}, want: filepath.Join(dir, "nodir") + ": cannot read drop-in directory: no such file or directory", errIs: fs.ErrNotExist},
		{desc: "drop-in dir is a file", o: LoadOptions{Path: file, DropInDir: file}, want: file + ": drop-in path is not a directory"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			_, _, err := Load(tc.o)
			if err == nil {
				t.Fatal("Load succeeded")
			}
			got := problemLines(t, err)
			if len(got) != 1 || got[0] != tc.want {
				t.Errorf("problems %q, want %q", got, tc.want)
			}
			if tc.errIs != nil && !errors.Is(err, tc.errIs) {
				t.Errorf("errors.Is(%v, %v) = false", err, tc.errIs)
			}
		})
	}
}

func TestLoadUnreadableFile(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root reads files regardless of their mode; TestLoadPathErrors covers an unreadable symlink loop")
	}
	p := writeFile(t, t.TempDir(), "config.yaml", hdr)
	if err := os.Chmod(p, 0); err != nil {
		t.Fatal(err)
	}
	_, _, err := Load(LoadOptions{Path: p})
	if got := problemLines(t, err); len(got) != 1 || got[0] != p+": cannot read: permission denied" {
		t.Errorf("problems %q", got)
	}
	if !errors.Is(err, fs.ErrPermission) {
		t.Errorf("errors.Is(err, fs.ErrPermission) = false for %v", err)
	}
}

func TestKubeletConfiguration(t *testing.T) {
	cfg, warnings, err := Load(LoadOptions{Path: "testdata/kubelet-config.yaml"})
	if err != nil {
		t.Fatal(err)
	}
	want := Default()
	want.ContainerRuntimeEndpoint = "unix:///var/run/containerd/containerd.sock"
	want.EvictionHard = map[string]string{"memory.available": "200Mi", "nodefs.available": "10%"}
	want.HealthzPort = 10248
	want.Authentication.X509.ClientCAFile = "/etc/kubernetes/pki/ca.crt" // its 0s cache TTLs mean the defaults
	want.Logging.Verbosity = 2
	want.MaxPods = 250
	want.NodeLeaseDurationSeconds = 60
	want.RegisterWithTaints = cfg.RegisterWithTaints
	want.StaticPodPath = "/etc/kubernetes/manifests"
	want.ClusterDNS = []string{"10.96.0.10"}
	want.ClusterDomain = "cluster.local"
	want.ResolvConf = "/run/systemd/resolve/resolv.conf"
	want.CgroupDriver = CgroupDriverSystemd
	want.RotateCertificates = true // kubeadm writes it
	if d := Diff(want, cfg); len(d) > 0 {
		t.Errorf("fields differ from expected: %v\ngot %+v", d, cfg)
	}
	if len(cfg.RegisterWithTaints) != 1 || cfg.RegisterWithTaints[0].Key != "node-role.kubernetes.io/control-plane" || cfg.RegisterWithTaints[0].Effect != "NoSchedule" {
		t.Errorf("registerWithTaints = %+v", cfg.RegisterWithTaints)
	}
	// kubeadm's file sets nothing nodeagent ignores: its 0s durations
	// are kubelet's defaults (syncFrequency, runtimeRequestTimeout, ...),
	// and httpCheckFrequency, cpuManagerReconcilePeriod, crashLoopBackOff
	// {}, logging.flushFrequency and logging.options at their values
	// change nothing in kubelet either.
	for _, w := range warnings {
		if strings.Contains(w, "KubeletConfiguration fields") {
			t.Errorf("kubeadm's file gets an unsupported-fields warning: %q", w)
		}
	}
}

func TestDecodeNeverPanicsOnOddYAML(t *testing.T) {
	for _, s := range []string{
		"&a [*a]", "a: &a\n  b: *a\n", "? [a]\n: b\n", "!!binary aGVsbG8=", "\x00\xff", "{", "[", "---\n...\n",
		hdr + "nodeLabels:\n  ? [x]\n  : y\n", hdr + "evictionHard: !!map {}\n",
	} {
		_, _, _ = DecodeBytes("odd", []byte(s))
	}
}

// KubeletConfiguration fields whose non-default values change behaviour a
// user relies on are refused by name; their defaults are accepted.
func TestKubeletRefusedFields(t *testing.T) {
	numaNodes(t, 1)
	for _, tc := range []struct {
		desc, body string
		want       []string // fields refused
		quiet      bool     // no unsupported-fields warning
	}{
		{"defaults, as kubeadm writes them", "failSwapOn: true\nmemorySwap: {}\ncpuManagerPolicy: none\nmemoryManagerPolicy: None\ntopologyManagerPolicy: none\nfeatureGates: {}\n", nil, false},
		{"swap", "failSwapOn: false\nmemorySwap:\n  swapBehavior: LimitedSwap\n", nil, false},
		{"NoSwap is the default", "memorySwap:\n  swapBehavior: NoSwap\n", nil, false},
		{"managers", "cpuManagerPolicy: static\nreservedSystemCPUs: \"0\"\nmemoryManagerPolicy: Static\ntopologyManagerPolicy: single-numa-node\n", []string{"memoryManagerPolicy"}, false},
		{"feature gates at kubelet's defaults", "featureGates:\n  UserNamespacesSupport: true\n  KubeletInUserNamespace: false\n  SidecarContainers: true\n", nil, false},
		{"feature gates nodeagent cannot honour, unknown, locked", "featureGates:\n  KubeletInUserNamespace: true\n  UserNamespacesSupport: false\n  NoSuchGate: true\n  SidecarContainers: false\n",
			[]string{"featureGates.KubeletInUserNamespace", "featureGates.NoSuchGate", "featureGates.SidecarContainers", "featureGates.UserNamespacesSupport"}, false},
		{"no-effect fields at any value, and their nested defaults", "httpCheckFrequency: 5s\ncpuManagerReconcilePeriod: 1m\ncrashLoopBackOff: {}\nlogging:\n  flushFrequency: 1s\n  options:\n    text:\n      infoBufferSize: \"0\"\n      splitStream: false\n    json:\n      infoBufferSize: \"0\"\n", nil, true},
		{"alpha logging options and the crash-loop maximum, which need gates nodeagent lacks", "crashLoopBackOff:\n  maxContainerRestartPeriod: 30s\nlogging:\n  options:\n    text:\n      splitStream: true\n    json:\n      infoBufferSize: 1Mi\n",
			[]string{"crashLoopBackOff.maxContainerRestartPeriod", "logging.options.json.infoBufferSize", "logging.options.text.splitStream"}, false},
		{"gates nodeagent honours both ways", "featureGates:\n  PodLevelResources: false\n  ImageVolume: true\n  KubeletPSI: false\n  CSIVolumeHealth: true\n", nil, false},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			_, warnings, err := DecodeBytes("k.yaml", []byte("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"+tc.body))
			var got []string
			var ce *Error
			if errors.As(err, &ce) {
				for _, p := range ce.Problems {
					got = append(got, p.Field)
					if !strings.Contains(p.Detail, "not supported") && !strings.Contains(p.Detail, "unrecognized feature gate: NoSuchGate") &&
						!strings.Contains(p.Detail, "Feature LoggingAlphaOptions is disabled") && !strings.Contains(p.Detail, "FeatureGate KubeletCrashLoopBackOffMax not enabled") &&
						!strings.Contains(p.Detail, "cannot set feature gate SidecarContainers to false, feature is locked to true") {
						t.Errorf("%s: detail %q does not say why", p.Field, p.Detail)
					}
				}
			} else if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("refused %v, want %v", got, tc.want)
			}
			for _, w := range warnings {
				if tc.quiet && strings.Contains(w, "KubeletConfiguration fields") {
					t.Errorf("unexpected unsupported-fields warning %q", w)
				}
			}
			for _, f := range tc.want {
				for _, w := range warnings {
					if strings.Contains(w, f) {
						t.Errorf("refused field %s is also in the warning %q", f, w)
					}
				}
			}
		})
	}
}

// kubelet's swap fields mean what they mean to kubelet: failSwapOn
// defaults to true, and a swapBehavior kubelet does not know is refused
// with kubelet's message.
func TestKubeletSwapFields(t *testing.T) {
	const head = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"
	cfg, _, err := DecodeBytes("k.yaml", []byte(head))
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.FailSwapOn || cfg.MemorySwap.SwapBehavior != "" {
		t.Errorf("defaults: failSwapOn %v, swapBehavior %q; want true, \"\"", cfg.FailSwapOn, cfg.MemorySwap.SwapBehavior)
	}
	cfg, _, err = DecodeBytes("k.yaml", []byte(head+"failSwapOn: false\nmemorySwap:\n  swapBehavior: LimitedSwap\n"))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.FailSwapOn || cfg.MemorySwap.SwapBehavior != SwapBehaviorLimitedSwap {
		t.Errorf("failSwapOn %v, swapBehavior %q; want false, LimitedSwap", cfg.FailSwapOn, cfg.MemorySwap.SwapBehavior)
	}
	_, _, err = DecodeBytes("k.yaml", []byte(head+"memorySwap:\n  swapBehavior: UnlimitedSwap\n"))
	if err == nil || !strings.Contains(err.Error(), "memorySwap.swapBehavior") || !strings.Contains(err.Error(), `must be one of: "", "LimitedSwap" or "NoSwap"`) {
		t.Errorf("UnlimitedSwap: error %v, want kubelet's message naming memorySwap.swapBehavior", err)
	}
}

// kubelet's periods and timeouts set in a KubeletConfiguration are used,
// with kubelet's meaning; kubeadm's 0s (TestKubeletConfiguration)
// means the default.
func TestKubeletPeriodsAndTimeouts(t *testing.T) {
	cfg, warnings, err := DecodeBytes("k.yaml", []byte("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"+
		"syncFrequency: 30s\nfileCheckFrequency: 5s\nruntimeRequestTimeout: 45s\nstreamingConnectionIdleTimeout: 5m\nvolumeStatsAggPeriod: -1s\n"))
	if err != nil || len(warnings) != 0 {
		t.Fatalf("DecodeBytes: %v, warnings %q", err, warnings)
	}
	for _, c := range []struct {
		field     string
		got, want time.Duration
	}{
		{"syncFrequency", cfg.SyncFrequency.Duration, 30 * time.Second},
		{"fileCheckFrequency", cfg.FileCheckFrequency.Duration, 5 * time.Second},
		{"runtimeRequestTimeout", cfg.RuntimeRequestTimeout.Duration, 45 * time.Second},
		{"streamingConnectionIdleTimeout", cfg.StreamingConnectionIdleTimeout.Duration, 5 * time.Minute},
		{"volumeStatsAggPeriod", cfg.VolumeStatsAggPeriod.Duration, -time.Second},
	} {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.field, c.got, c.want)
		}
	}
}

// docs/joining.md's list of the KubeletConfiguration values that stop
// the agent agrees with the decoder: each value below is named there as
// refused exactly when DecodeBytes refuses it (swap fields are taken as
// kubelet takes them, not refused).
func TestJoiningDocRefusals(t *testing.T) {
	// The topology manager is refused on machines with more than one
	// NUMA node, as docs/joining.md says.
	numaNodes(t, 2)
	b, err := os.ReadFile("../docs/joining.md")
	if err != nil {
		t.Fatal(err)
	}
	const lead = "Fields that change behaviour a user relies on are refused by name"
	doc := string(b)
	i := strings.Index(doc, lead)
	if i < 0 {
		t.Fatalf("docs/joining.md lacks the paragraph %q", lead)
	}
	para, _, _ := strings.Cut(doc[i:], "\n\n")
	// The refusals end at "Swap is not among them", if the paragraph says so.
	refusedPart, _, _ := strings.Cut(para, "Swap is not among them")
	refusedPart = strings.Join(strings.Fields(refusedPart), " ")
	const head = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"
	for _, tc := range []struct {
		field, yaml string
	}{
		{"failSwapOn", "failSwapOn: false\n"},
		{"memorySwap.swapBehavior", "memorySwap:\n  swapBehavior: LimitedSwap\n"},
		{"cpuManagerPolicy", "cpuManagerPolicy: static\nsystemReserved:\n  cpu: 500m\n"},
		{"memoryManagerPolicy", "memoryManagerPolicy: Static\n"},
		{"topologyManagerPolicy", "topologyManagerPolicy: single-numa-node\n"},
		{"crashLoopBackOff.maxContainerRestartPeriod", "crashLoopBackOff:\n  maxContainerRestartPeriod: 30s\n"},
	} {
		_, _, err := DecodeBytes("k.yaml", []byte(head+tc.yaml))
		refused := err != nil && strings.Contains(err.Error(), tc.field)
		documented := strings.Contains(refusedPart, "`"+tc.field)
		if refused != documented {
			t.Errorf("%s: refused by the decoder %v (%v), named as refused in docs/joining.md %v", strings.TrimSpace(tc.yaml), refused, err, documented)
		}
	}
}
