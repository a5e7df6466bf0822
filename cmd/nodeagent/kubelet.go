package main

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"

	"github.com/nodeagent/nodeagent/config"
	"github.com/nodeagent/nodeagent/nodestatus"
)

// KubeletName is the name the agent answers to as kubelet: the package's
// /usr/bin/kubelet symlink, which kubelet.service (kubeadm's unit and
// drop-in) and `kubeadm join`'s preflight (`kubelet --version`) run.
const KubeletName = "kubelet"

// kubeletUsage is printed for `kubelet --help`.
const kubeletUsage = `kubelet (nodeagent): nodeagent started under kubelet's name.

It accepts kubelet's flags that nodeagent implements, with kubelet's meaning,
and refuses every other flag by name. Defaults are kubelet's where they differ
from nodeagent's: --root-dir /var/lib/kubelet, healthzPort 10248.

Usage:
  kubelet --version
  kubelet --kubeconfig FILE [--bootstrap-kubeconfig FILE] [--config FILE] [flags]

Flags:
`

// kubeletFlag is one kubelet flag the entry point knows: set applies its
// value; boolean flags take no separate value.
type kubeletFlag struct {
	usage   string
	boolean bool
	set     func(k *kubeletInvocation, v string) error
}

// kubeletInvocation is what the flags asked for.
type kubeletInvocation struct {
	opts     config.LoadOptions
	version  bool
	help     bool
	warnings []string
}

func strFlag(usage string, dst func(*kubeletInvocation) **string) kubeletFlag {
	return kubeletFlag{usage: usage, set: func(k *kubeletInvocation, v string) error {
		*dst(k) = &v
		return nil
	}}
}

// kubeletFlags are kubelet's flags the entry point accepts. kubeadm's
// kubelet.service drop-in passes --bootstrap-kubeconfig, --kubeconfig and
// --config; its kubeadm-flags.env --container-runtime-endpoint (before
// NodeLocalCRISocket), --pod-infra-container-image, --hostname-override,
// --register-with-taints and the operator's kubeletExtraArgs.
var kubeletFlags = map[string]kubeletFlag{
	"version": {usage: "print kubelet's version line (Kubernetes vX.Y.Z, the release whose kubelet nodeagent implements) and exit", boolean: true,
		set: func(k *kubeletInvocation, v string) error {
			switch v {
			case "", "true":
				k.version = true
			case "false":
			default:
				return fmt.Errorf("--version=%s is not supported by nodeagent (only --version)", v)
			}
			return nil
		}},
	"help": {usage: "print this help", boolean: true, set: func(k *kubeletInvocation, _ string) error {
		k.help = true
		return nil
	}},
	"config": {usage: "configuration file (a KubeletConfiguration, as kubeadm writes /var/lib/kubelet/config.yaml, or a NodeAgentConfiguration)",
		set: func(k *kubeletInvocation, v string) error {
			k.opts.Path = v
			return nil
		}},
	"config-dir": {usage: "drop-in directory; its *.conf files apply in lexical order over --config",
		set: func(k *kubeletInvocation, v string) error {
			k.opts.DropInDir = v
			return nil
		}},
	"kubeconfig": strFlag("kubeconfig with the node's credentials; written by TLS bootstrap when missing", func(k *kubeletInvocation) **string { return &k.opts.Overrides.Kubeconfig }),
	"bootstrap-kubeconfig": strFlag("kubeconfig to obtain the node's client certificate with (TLS bootstrap)",
		func(k *kubeletInvocation) **string { return &k.opts.Overrides.BootstrapKubeconfig }),
	"cert-dir":          strFlag("directory of the certificates the agent obtains (default <root-dir>/pki)", func(k *kubeletInvocation) **string { return &k.opts.Overrides.CertDir }),
	"root-dir":          strFlag("the agent's state directory (default /var/lib/kubelet)", func(k *kubeletInvocation) **string { return &k.opts.Overrides.RootDir }),
	"hostname-override": strFlag("node name", func(k *kubeletInvocation) **string { return &k.opts.Overrides.HostnameOverride }),
	"node-ip":           strFlag("node IP address", func(k *kubeletInvocation) **string { return &k.opts.Overrides.NodeIP }),
	"provider-id":       strFlag("the Node's spec.providerID", func(k *kubeletInvocation) **string { return &k.opts.Overrides.ProviderID }),
	"container-runtime-endpoint": strFlag("containerd's socket (nodeagent talks to containerd's own API on it, not CRI)",
		func(k *kubeletInvocation) **string { return &k.opts.Overrides.ContainerRuntimeEndpoint }),
	"image-credential-provider-config": strFlag("credential provider plugin config file or directory",
		func(k *kubeletInvocation) **string { return &k.opts.Overrides.ImageCredentialProviderConfig }),
	"image-credential-provider-bin-dir": strFlag("credential provider plugin directory",
		func(k *kubeletInvocation) **string { return &k.opts.Overrides.ImageCredentialProviderBinDir }),
	"v": {usage: "log verbosity", set: func(k *kubeletInvocation, v string) error {
		n, err := strconv.ParseInt(v, 10, 32)
		if err != nil {
			return fmt.Errorf("invalid value %q for flag -v: must be an integer", v)
		}
		n32 := int32(n)
		k.opts.Overrides.Verbosity = &n32
		return nil
	}},
	"node-labels": {usage: "labels added to the Node at registration: key=value,...", set: func(k *kubeletInvocation, v string) error {
		labels, err := parseNodeLabels(v)
		if err != nil {
			return err
		}
		k.opts.Overrides.NodeLabels = labels
		return nil
	}},
	"register-with-taints": {usage: "taints set on the Node at registration: key=value:Effect,...", set: func(k *kubeletInvocation, v string) error {
		taints, err := parseTaints(v)
		if err != nil {
			return err
		}
		k.opts.Overrides.RegisterWithTaints = taints
		return nil
	}},
	"pod-infra-container-image": {usage: "accepted and ignored: nodeagent runs no sandbox image", set: func(k *kubeletInvocation, v string) error {
		k.warnings = append(k.warnings, fmt.Sprintf("ignoring --pod-infra-container-image=%s: nodeagent runs pods without a sandbox (pause) image, "+
			"so there is no image to use or to keep from garbage collection (kubelet 1.34 uses the flag only for the latter)", v))
		return nil
	}},
	"cloud-provider": {usage: `only "" is supported`, set: func(k *kubeletInvocation, v string) error {
		if v != "" {
			return fmt.Errorf("--cloud-provider=%s is not supported by nodeagent: it does not taint the node "+
				"node.cloudprovider.kubernetes.io/uninitialized for a cloud controller manager to initialize", v)
		}
		return nil
	}},
}

// runKubelet runs the agent started as kubelet: kubelet's flags, kubelet's
// defaults where nodeagent's differ, kubelet's version line.
func runKubelet(args []string, stdout, stderr io.Writer) int {
	k, err := parseKubeletArgs(args)
	if err != nil {
		fmt.Fprintf(stderr, "kubelet (nodeagent): %v\n", err)
		return 1
	}
	if k.help {
		fmt.Fprint(stdout, kubeletUsage)
		for _, name := range slices.Sorted(maps.Keys(kubeletFlags)) {
			fmt.Fprintf(stdout, "  --%s\n\t%s\n", name, kubeletFlags[name].usage)
		}
		return 0
	}
	if k.version {
		fmt.Fprintln(stdout, kubeletVersionLine(version))
		return 0
	}
	if k.opts.Overrides.Kubeconfig == nil {
		fmt.Fprintln(stderr, "kubelet (nodeagent): --kubeconfig is required: nodeagent has no standalone mode (kubelet without --kubeconfig runs only static pods)")
		return 1
	}
	k.opts.Overrides.KubeletDefaults = true
	return startAgent(k.opts, stderr, k.warnings)
}

// kubeletVersionLine is `kubelet --version`'s output: "Kubernetes
// v1.34.4+nodeagent.<version>", which kubeadm's KubeletVersionCheck parses
// (the build metadata does not count in its version comparison).
func kubeletVersionLine(agentVersion string) string {
	return "Kubernetes " + nodestatus.KubeletVersion(agentVersion)
}

// parseKubeletArgs parses kubelet's command line: --name=value, --name
// value, -name=value; booleans as --name or --name=true|false. A flag
// kubelet has but nodeagent does not implement is refused by name.
func parseKubeletArgs(args []string) (*kubeletInvocation, error) {
	k := &kubeletInvocation{}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "-h" {
			k.help = true
			continue
		}
		if !strings.HasPrefix(a, "-") || a == "-" || a == "--" {
			return nil, fmt.Errorf("unexpected argument %q (kubelet takes flags only)", a)
		}
		name := strings.TrimPrefix(strings.TrimPrefix(a, "-"), "-")
		value, hasValue := "", false
		if n, v, ok := strings.Cut(name, "="); ok {
			name, value, hasValue = n, v, true
		}
		f, ok := kubeletFlags[name]
		if !ok {
			return nil, fmt.Errorf("flag --%s is not supported by nodeagent; supported kubelet flags: --%s (see docs/joining.md)",
				name, strings.Join(slices.Sorted(maps.Keys(kubeletFlags)), ", --"))
		}
		if !hasValue && !f.boolean {
			if i+1 >= len(args) {
				return nil, fmt.Errorf("flag --%s needs a value", name)
			}
			i++
			value = args[i]
		}
		if err := f.set(k, value); err != nil {
			return nil, err
		}
	}
	return k, nil
}

// parseNodeLabels parses kubelet's --node-labels: key=value pairs
// separated by commas.
func parseNodeLabels(s string) (map[string]string, error) {
	labels := map[string]string{}
	for _, kv := range strings.Split(s, ",") {
		if kv = strings.TrimSpace(kv); kv == "" {
			continue
		}
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return nil, fmt.Errorf("invalid --node-labels entry %q: want key=value", kv)
		}
		labels[k] = v
	}
	return labels, nil
}

// parseTaints parses kubelet's --register-with-taints: key[=value]:Effect
// separated by commas.
func parseTaints(s string) ([]v1.Taint, error) {
	var taints []v1.Taint
	for _, t := range strings.Split(s, ",") {
		if t = strings.TrimSpace(t); t == "" {
			continue
		}
		kv, effect, ok := strings.Cut(t, ":")
		if !ok {
			return nil, fmt.Errorf("invalid --register-with-taints entry %q: want key[=value]:Effect", t)
		}
		switch e := v1.TaintEffect(effect); e {
		case v1.TaintEffectNoSchedule, v1.TaintEffectPreferNoSchedule, v1.TaintEffectNoExecute:
		default:
			return nil, fmt.Errorf("invalid --register-with-taints entry %q: effect %q is not NoSchedule, PreferNoSchedule or NoExecute", t, effect)
		}
		k, v, _ := strings.Cut(kv, "=")
		taints = append(taints, v1.Taint{Key: k, Value: v, Effect: v1.TaintEffect(effect)})
	}
	return taints, nil
}
