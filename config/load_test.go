package config

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

func ptr[T any](v T) *T { return &v }

func TestLoadDefaulting(t *testing.T) {
	for _, tc := range []struct {
		desc    string
		content string // the main file; "" means no file
		want    func(c *NodeAgentConfiguration)
	}{
		{desc: "no file", want: func(c *NodeAgentConfiguration) {}},
		{desc: "only apiVersion and kind", content: hdr, want: func(c *NodeAgentConfiguration) {}},
		{
			desc:    "update frequency alone sets the report frequency, as kubelet",
			content: hdr + "nodeStatusUpdateFrequency: 20s\n",
			want: func(c *NodeAgentConfiguration) {
				c.NodeStatusUpdateFrequency = dur(20 * time.Second)
				c.NodeStatusReportFrequency = dur(20 * time.Second)
			},
		},
		{
			desc:    "both frequencies",
			content: hdr + "nodeStatusUpdateFrequency: 20s\nnodeStatusReportFrequency: 1m\n",
			want: func(c *NodeAgentConfiguration) {
				c.NodeStatusUpdateFrequency = dur(20 * time.Second)
				c.NodeStatusReportFrequency = dur(time.Minute)
			},
		},
		{
			desc:    "report frequency alone",
			content: hdr + "nodeStatusReportFrequency: 1m\n",
			want:    func(c *NodeAgentConfiguration) { c.NodeStatusReportFrequency = dur(time.Minute) },
		},
		{
			desc:    "present zero values are used as written",
			content: hdr + "healthzPort: 0\nevictionHard: {}\npleg:\n  eventSources: []\n",
			want: func(c *NodeAgentConfiguration) {
				c.HealthzPort = 0
				c.EvictionHard = map[string]string{}
				c.PLEG.EventSources = []string{}
			},
		},
		{
			desc:    "null means absent",
			content: hdr + "maxPods: null\nevictionHard: ~\npleg: null\n",
			want:    func(c *NodeAgentConfiguration) {},
		},
		{
			desc:    "a set map replaces the default map",
			content: hdr + "evictionHard:\n  memory.available: 1Gi\n",
			want:    func(c *NodeAgentConfiguration) { c.EvictionHard = map[string]string{"memory.available": "1Gi"} },
		},
		{
			desc:    "a partial section keeps the other defaults",
			content: hdr + "pleg:\n  relistPeriod: 10m\nlogging:\n  verbosity: 4\n",
			want: func(c *NodeAgentConfiguration) {
				c.PLEG.RelistPeriod = dur(10 * time.Minute)
				c.Logging.Verbosity = 4
			},
		},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			var o LoadOptions
			if tc.content != "" {
				o.Path = writeFile(t, t.TempDir(), "config.yaml", tc.content)
			}
			got, warnings, err := Load(o)
			if err != nil {
				t.Fatal(err)
			}
			if len(warnings) > 0 {
				t.Errorf("warnings: %q", warnings)
			}
			want := Default()
			tc.want(want)
			if !reflect.DeepEqual(got, want) {
				t.Errorf("fields differ: %v\ngot  %+v\nwant %+v", Diff(want, got), got, want)
			}
		})
	}
}

func TestLoadRelativePaths(t *testing.T) {
	dir := t.TempDir()
	p := writeFile(t, dir, "etc/config.yaml", hdr+"kubeconfig: kubeconfig\nstaticPodPath: ../manifests\n")
	writeFile(t, dir, "etc/conf.d/10.conf", hdr+"rootDir: state\n")
	cfg, _, err := Load(LoadOptions{Path: p, DropInDir: filepath.Join(dir, "etc/conf.d")})
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(dir, "etc/kubeconfig"); cfg.Kubeconfig != want {
		t.Errorf("kubeconfig = %q, want %q", cfg.Kubeconfig, want)
	}
	if want := filepath.Join(dir, "manifests"); cfg.StaticPodPath != want {
		t.Errorf("staticPodPath = %q, want %q", cfg.StaticPodPath, want)
	}
	if want := filepath.Join(dir, "etc/conf.d/state"); cfg.RootDir != want {
		t.Errorf("rootDir = %q, want %q", cfg.RootDir, want)
	}
}

func TestLoadMerge(t *testing.T) {
	main := hdr + `
nodeLeaseDurationSeconds: 40
maxPods: 50
evictionHard:
  memory.available: 100Mi
  nodefs.available: 10%
nodeLabels:
  example.com/a: "1"
registerWithTaints:
- key: a
  effect: NoSchedule
pleg:
  relistPeriod: 10m
kubeconfig: /etc/file/kubeconfig
`
	for _, tc := range []struct {
		desc        string
		noMain      bool
		dropIns     map[string]string
		overrides   Overrides
		want        func(c *NodeAgentConfiguration)
		wantOrigins map[string]string // path → file name relative to the dir, or a flag
		wantWarn    []string
	}{
		{
			desc: "no drop-ins",
			want: func(c *NodeAgentConfiguration) {},
		},
		{
			desc:        "scalars override in lexical order",
			dropIns:     map[string]string{"20-b.conf": hdr + "nodeLeaseDurationSeconds: 60\n", "10-a.conf": hdr + "nodeLeaseDurationSeconds: 50\nmaxPods: 70\n"},
			want:        func(c *NodeAgentConfiguration) { c.NodeLeaseDurationSeconds = 60; c.MaxPods = 70 },
			wantOrigins: map[string]string{"nodeLeaseDurationSeconds": "d/20-b.conf", "maxPods": "d/10-a.conf", "pleg.relistPeriod": "config.yaml"},
		},
		{
			desc:    "maps merge key by key",
			dropIns: map[string]string{"10.conf": hdr + "evictionHard:\n  memory.available: 500Mi\n  pid.available: 5%\nnodeLabels:\n  example.com/b: \"2\"\n"},
			want: func(c *NodeAgentConfiguration) {
				c.EvictionHard = map[string]string{"memory.available": "500Mi", "nodefs.available": "10%", "pid.available": "5%"}
				c.NodeLabels = map[string]string{"example.com/a": "1", "example.com/b": "2"}
			},
			wantOrigins: map[string]string{"evictionHard[memory.available]": "d/10.conf", "evictionHard[nodefs.available]": "config.yaml"},
		},
		{
			desc:    "a map key set to null is removed",
			dropIns: map[string]string{"10.conf": hdr + "evictionHard:\n  nodefs.available: null\n"},
			want:    func(c *NodeAgentConfiguration) { c.EvictionHard = map[string]string{"memory.available": "100Mi"} },
		},
		{
			desc:    "lists replace",
			dropIns: map[string]string{"10.conf": hdr + "registerWithTaints:\n- key: b\n  effect: NoExecute\npleg:\n  eventSources: [containerd]\n"},
			want: func(c *NodeAgentConfiguration) {
				c.RegisterWithTaints = []v1.Taint{{Key: "b", Effect: v1.TaintEffectNoExecute}}
				c.PLEG.EventSources = []string{"containerd"}
			},
		},
		{
			desc:    "sections merge field by field",
			dropIns: map[string]string{"10.conf": hdr + "pleg:\n  healthThreshold: 4m\n"},
			want:    func(c *NodeAgentConfiguration) { c.PLEG.HealthThreshold = dur(4 * time.Minute) },
		},
		{
			desc:    "null resets to the default",
			dropIns: map[string]string{"10.conf": hdr + "maxPods: null\npleg:\n  relistPeriod: null\n"},
			want: func(c *NodeAgentConfiguration) {
				c.MaxPods = DefaultMaxPods
				c.PLEG.RelistPeriod = dur(DefaultPLEGRelistPeriod)
			},
			wantOrigins: map[string]string{"maxPods": "default", "pleg.relistPeriod": "default"},
		},
		{
			desc:    "the main file's defaulted report frequency stays when a drop-in sets the update frequency, as kubelet",
			dropIns: map[string]string{"10.conf": hdr + "nodeStatusUpdateFrequency: 20s\n"},
			want:    func(c *NodeAgentConfiguration) { c.NodeStatusUpdateFrequency = dur(20 * time.Second) },
		},
		{
			desc:    "a KubeletConfiguration drop-in",
			dropIns: map[string]string{"10.conf": "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nmaxPods: 30\ncgroupDriver: systemd\n"},
			want:    func(c *NodeAgentConfiguration) { c.MaxPods = 30; c.CgroupDriver = CgroupDriverSystemd },
		},
		{
			desc:    "a KubeletConfiguration drop-in's podLogsDir (kubeadm and GKE/AKS node configs set it)",
			dropIns: map[string]string{"10.conf": "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\npodLogsDir: /mnt/logs/pods\n"},
			want:    func(c *NodeAgentConfiguration) { c.PodLogsDir = "/mnt/logs/pods" },
		},
		{
			desc: "a KubeletConfiguration drop-in with soft eviction settings",
			dropIns: map[string]string{"10.conf": "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n" +
				"evictionSoft:\n  memory.available: 1Gi\nevictionSoftGracePeriod:\n  memory.available: 1m30s\n" +
				"evictionMaxPodGracePeriod: 60\nevictionMinimumReclaim:\n  memory.available: 500Mi\n"},
			want: func(c *NodeAgentConfiguration) {
				c.EvictionSoft = map[string]string{"memory.available": "1Gi"}
				c.EvictionSoftGracePeriod = map[string]string{"memory.available": "1m30s"}
				c.EvictionMaxPodGracePeriod = 60
				c.EvictionMinimumReclaim = map[string]string{"memory.available": "500Mi"}
			},
		},
		{
			desc: "other files are skipped, with a warning unless hidden or a directory",
			dropIns: map[string]string{
				"10.yaml":        hdr + "maxPods: 1\n",
				".20.conf":       hdr + "maxPods: 2\n",
				"sub/30.conf":    hdr + "maxPods: 3\n",
				"..data/40.conf": hdr + "maxPods: 4\n",
			},
			want:     func(c *NodeAgentConfiguration) {},
			wantWarn: []string{"DIR/d/10.yaml: ignored: drop-in files must end in .conf"},
		},
		{
			desc:      "flags override drop-ins",
			dropIns:   map[string]string{"10.conf": hdr + "kubeconfig: /etc/dropin/kubeconfig\nhostnameOverride: from-dropin\nlogging:\n  verbosity: 3\n"},
			overrides: Overrides{Kubeconfig: ptr("/etc/flag/kubeconfig"), HostnameOverride: ptr(" From-Flag "), NodeIP: ptr("192.0.2.1"), Verbosity: ptr(int32(5))},
			want: func(c *NodeAgentConfiguration) {
				c.Kubeconfig = "/etc/flag/kubeconfig"
				c.HostnameOverride = "from-flag"
				c.NodeIP = "192.0.2.1"
				c.Logging.Verbosity = 5
			},
			wantOrigins: map[string]string{"kubeconfig": "flag --kubeconfig", "hostnameOverride": "flag --hostname-override", "logging.verbosity": "flag -v"},
		},
		{
			desc:    "drop-ins without a main file apply over the defaults",
			noMain:  true,
			dropIns: map[string]string{"10.conf": hdr + "maxPods: 20\n"},
			want: func(c *NodeAgentConfiguration) {
				*c = *Default()
				c.MaxPods = 20
			},
		},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			dir := t.TempDir()
			o := LoadOptions{Overrides: tc.overrides}
			if !tc.noMain {
				o.Path = writeFile(t, dir, "config.yaml", main)
			}
			if tc.dropIns != nil {
				o.DropInDir = filepath.Join(dir, "d")
				if err := os.MkdirAll(o.DropInDir, 0o755); err != nil {
					t.Fatal(err)
				}
				for name, content := range tc.dropIns {
					writeFile(t, o.DropInDir, name, content)
				}
			}
			res, err := LoadDetailed(o)
			if err != nil {
				t.Fatal(err)
			}
			want := Default()
			want.NodeLeaseDurationSeconds = 40
			want.MaxPods = 50
			want.EvictionHard = map[string]string{"memory.available": "100Mi", "nodefs.available": "10%"}
			want.NodeLabels = map[string]string{"example.com/a": "1"}
			want.RegisterWithTaints = []v1.Taint{{Key: "a", Effect: v1.TaintEffectNoSchedule}}
			want.PLEG.RelistPeriod = dur(10 * time.Minute)
			want.Kubeconfig = "/etc/file/kubeconfig"
			tc.want(want)
			if !reflect.DeepEqual(res.Config, want) {
				t.Errorf("fields differ: %v\ngot  %+v\nwant %+v", Diff(want, res.Config), res.Config, want)
			}
			for path, wantOrigin := range tc.wantOrigins {
				if wantOrigin != "default" && !strings.HasPrefix(wantOrigin, "flag ") {
					wantOrigin = filepath.Join(dir, wantOrigin)
				}
				if got := res.Origin(path); got != wantOrigin {
					t.Errorf("Origin(%s) = %q, want %q", path, got, wantOrigin)
				}
			}
			if len(res.Warnings) != len(tc.wantWarn) {
				t.Fatalf("warnings %q, want %q", res.Warnings, tc.wantWarn)
			}
			for i, w := range tc.wantWarn {
				w = strings.ReplaceAll(w, "DIR", dir)
				if !strings.Contains(res.Warnings[i], w) {
					t.Errorf("warning %q does not contain %q", res.Warnings[i], w)
				}
			}
		})
	}
}

func TestLoadBadDropIns(t *testing.T) {
	for _, tc := range []struct {
		desc    string
		dropIns map[string]string
		want    []string // problem lines with DIR for the drop-in directory
	}{
		{
			desc:    "missing apiVersion and kind",
			dropIns: map[string]string{"10.conf": "maxPods: 3\n"},
			want: []string{
				"DIR/10.conf: apiVersion: Required value: must be config.nodeagent.io/v1alpha1 (or kubelet.config.k8s.io/v1beta1)",
				"DIR/10.conf: kind: Required value: must be NodeAgentConfiguration",
			},
		},
		{
			desc:    "empty drop-in",
			dropIns: map[string]string{"10.conf": ""},
			want:    []string{"DIR/10.conf: file is empty; a configuration needs at least apiVersion: config.nodeagent.io/v1alpha1 and kind: NodeAgentConfiguration"},
		},
		{
			desc:    "problems in several drop-ins are all reported",
			dropIns: map[string]string{"10.conf": hdr + "maxPod: 3\n", "20.conf": hdr + "pleg: [1]\n", "30.conf": hdr + "maxPods: 3\n"},
			want: []string{
				`DIR/10.conf:3: maxPod: unknown field (did you mean "maxPods"?)`,
				`DIR/20.conf:3: pleg: Invalid value: "[1]": must be a mapping (object)`,
			},
		},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			dir := t.TempDir()
			for name, content := range tc.dropIns {
				writeFile(t, dir, name, content)
			}
			_, _, err := Load(LoadOptions{DropInDir: dir})
			got := problemLines(t, err)
			want := strings.ReplaceAll(strings.Join(tc.want, "\n"), "DIR", dir)
			if strings.Join(got, "\n") != want {
				t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), want)
			}
		})
	}
}

func TestDefaultsYAMLRoundTrips(t *testing.T) {
	y := DefaultsYAML()
	cfg, warnings, err := DecodeBytes("defaults", y)
	if err != nil {
		t.Fatalf("%v\n%s", err, y)
	}
	if len(warnings) > 0 {
		t.Errorf("warnings: %q", warnings)
	}
	if !reflect.DeepEqual(cfg, Default()) {
		t.Errorf("defaults YAML decodes to a different configuration: %v", Diff(Default(), cfg))
	}
	// Every field is in the output, with a comment above it.
	lines := strings.Split(string(y), "\n")
	for _, path := range FieldPaths() {
		leaf := path[strings.LastIndex(path, ".")+1:]
		found := false
		for i, l := range lines {
			if strings.HasPrefix(strings.TrimSpace(l), leaf+":") {
				found = i > 0 && strings.HasPrefix(strings.TrimSpace(lines[i-1]), "# ")
				break
			}
		}
		if !found {
			t.Errorf("field %s is missing or has no comment in the defaults YAML", path)
		}
	}
}

func TestEffectiveYAMLRoundTrips(t *testing.T) {
	dir := t.TempDir()
	p := writeFile(t, dir, "config.yaml", string(mustRead(t, "testdata/nodeagent-config.yaml")))
	writeFile(t, dir, "d/10.conf", hdr+"nodeLeaseDurationSeconds: 60\nevictionHard:\n  pid.available: 5%\n")
	res, err := LoadDetailed(LoadOptions{Path: p, DropInDir: filepath.Join(dir, "d"), Overrides: Overrides{HostnameOverride: ptr("node-1")}})
	if err != nil {
		t.Fatal(err)
	}
	y := EffectiveYAML(res)
	for _, want := range []string{
		"# from " + filepath.Join(dir, "d/10.conf") + "\nnodeLeaseDurationSeconds: 60\n",
		"# from flag --hostname-override\nhostnameOverride: node-1\n",
		"# from " + p + "\nmaxPods: 110\n",
		"# from " + p + ", " + filepath.Join(dir, "d/10.conf") + "\nevictionHard:\n",
	} {
		if !strings.Contains(string(y), want) {
			t.Errorf("effective YAML lacks %q:\n%s", want, y)
		}
	}
	cfg, _, err := DecodeBytes("effective", y)
	if err != nil {
		t.Fatalf("%v\n%s", err, y)
	}
	if !reflect.DeepEqual(cfg, res.Config) {
		t.Errorf("effective YAML decodes to a different configuration: %v", Diff(res.Config, cfg))
	}
}

func mustRead(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestDiffAndLiveChanges(t *testing.T) {
	a := Default()
	b := Default()
	if d := Diff(a, b); len(d) != 0 {
		t.Fatalf("Diff of equal configs = %v", d)
	}
	b.SystemReserved = nil // nil and empty are equal
	if !Equal(a, b) {
		t.Errorf("nil and empty maps differ")
	}
	b.NodeLeaseDurationSeconds = 60
	b.NodeStatusReportFrequency = dur(time.Minute)
	b.Logging.Verbosity = 3
	b.MaxPods = 5
	b.PLEG.EventSources = []string{"cgroups"}
	live, restart := LiveChanges(a, b)
	if want := []string{"nodeLeaseDurationSeconds", "nodeStatusReportFrequency", "logging.verbosity"}; !reflect.DeepEqual(live, want) {
		t.Errorf("live = %v, want %v", live, want)
	}
	if want := []string{"maxPods", "pleg.eventSources"}; !reflect.DeepEqual(restart, want) {
		t.Errorf("requiresRestart = %v, want %v", restart, want)
	}
	in := WithLiveChanges(a, b)
	if d := Diff(a, in); !reflect.DeepEqual(d, live) {
		t.Errorf("WithLiveChanges changed %v, want %v", d, live)
	}
	if in.MaxPods != a.MaxPods {
		t.Errorf("WithLiveChanges took a restart-only field")
	}
	// Every live field is really a field.
	paths := map[string]bool{}
	for _, p := range FieldPaths() {
		paths[p] = true
	}
	for _, f := range LiveFields {
		if !paths[f] {
			t.Errorf("LiveFields names %q, which is not a field", f)
		}
	}
}

func TestDeepCopyIsDeep(t *testing.T) {
	a := Default()
	a.RegisterWithTaints = []v1.Taint{{Key: "a", Effect: v1.TaintEffectNoSchedule}}
	b := a.DeepCopy()
	b.EvictionHard["memory.available"] = "1Gi"
	b.PLEG.EventSources[0] = "x"
	b.RegisterWithTaints[0].Key = "b"
	b.NodeLabels["x"] = "y"
	if a.EvictionHard["memory.available"] != "100Mi" || a.PLEG.EventSources[0] != "cgroups" || a.RegisterWithTaints[0].Key != "a" || len(a.NodeLabels) != 0 {
		t.Errorf("DeepCopy shares memory: %+v", a)
	}
}
