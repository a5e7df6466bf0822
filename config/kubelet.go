package config

import (
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"sort"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
)

// kubeletSupported are the KubeletConfiguration fields nodeagent uses, with
// the same name, type and meaning in NodeAgentConfiguration. Every other
// field set in a KubeletConfiguration file is reported as unsupported.
var kubeletSupported = map[string]bool{
	"nodeLeaseDurationSeconds":               true,
	"nodeStatusUpdateFrequency":              true,
	"nodeStatusReportFrequency":              true,
	"nodeStatusMaxImages":                    true,
	"containerRuntimeEndpoint":               true,
	"staticPodPath":                          true,
	"maxPods":                                true,
	"syncFrequency":                          true,
	"fileCheckFrequency":                     true,
	"runtimeRequestTimeout":                  true,
	"streamingConnectionIdleTimeout":         true,
	"volumeStatsAggPeriod":                   true,
	"systemReserved":                         true,
	"kubeReserved":                           true,
	"evictionHard":                           true,
	"evictionPressureTransitionPeriod":       true,
	"evictionSoft":                           true,
	"evictionSoftGracePeriod":                true,
	"evictionMaxPodGracePeriod":              true,
	"evictionMinimumReclaim":                 true,
	"mergeDefaultEvictionSettings":           true,
	"imageGCHighThresholdPercent":            true,
	"imageGCLowThresholdPercent":             true,
	"imageMinimumGCAge":                      true,
	"imageMaximumGCAge":                      true,
	"healthzBindAddress":                     true,
	"healthzPort":                            true,
	"registerWithTaints":                     true,
	"registerNode":                           true,
	"providerID":                             true,
	"clusterDNS":                             true,
	"clusterDomain":                          true,
	"resolvConf":                             true,
	"address":                                true,
	"port":                                   true,
	"enableServer":                           true,
	"readOnlyPort":                           true,
	"tlsCertFile":                            true,
	"tlsPrivateKeyFile":                      true,
	"serverTLSBootstrap":                     true,
	"tlsCipherSuites":                        true,
	"tlsMinVersion":                          true,
	"rotateCertificates":                     true,
	"kubeAPIQPS":                             true,
	"kubeAPIBurst":                           true,
	"eventRecordQPS":                         true,
	"eventBurst":                             true,
	"contentType":                            true,
	"serializeImagePulls":                    true,
	"maxParallelImagePulls":                  true,
	"registryPullQPS":                        true,
	"registryBurst":                          true,
	"authentication":                         true,
	"authorization":                          true,
	"enableDebuggingHandlers":                true,
	"enableContentionProfiling":              true,
	"enableProfilingHandler":                 true,
	"enableDebugFlagsHandler":                true,
	"enableSystemLogHandler":                 true,
	"enableSystemLogQuery":                   true,
	"containerLogMaxSize":                    true,
	"containerLogMaxFiles":                   true,
	"podLogsDir":                             true,
	"seccompDefault":                         true,
	"allowedUnsafeSysctls":                   true,
	"imagePullCredentialsVerificationPolicy": true,
	"userNamespaces":                         true,
	"preloadedImagesVerificationAllowlist":   true,
	"cgroupDriver":                           true,
	"cgroupRoot":                             true,
	"cgroupsPerQOS":                          true,
	"enforceNodeAllocatable":                 true,
	"podPidsLimit":                           true,
	"failSwapOn":                             true,
	"protectKernelDefaults":                  true,
	"maxOpenFiles":                           true,
	"oomScoreAdj":                            true,
	"failCgroupV1":                           true,
	"podsPerCore":                            true,
	"memorySwap":                             true,
	"singleProcessOOMKill":                   true,
	"featureGates":                           true,
	"shutdownGracePeriod":                    true,
	"shutdownGracePeriodCriticalPods":        true,
	"shutdownGracePeriodByPodPriority":       true,
	"cpuManagerPolicy":                       true,
	"cpuCFSQuota":                            true,
	"cpuCFSQuotaPeriod":                      true,
	"cpuManagerPolicyOptions":                true,
	"cpuManagerReconcilePeriod":              true,
	"reservedSystemCPUs":                     true,
	"topologyManagerPolicy":                  true,
	"topologyManagerScope":                   true,
	"topologyManagerPolicyOptions":           true,
}

// kubeletLoggingSupported are the fields of KubeletConfiguration.logging
// nodeagent uses.
var kubeletLoggingSupported = map[string]bool{"format": true, "verbosity": true}

// kubeletNoEffect are KubeletConfiguration fields that are accepted
// without a warning and not used, because whatever value passes
// refusedKubeletFields changes nothing in kubelet either, on a node as
// nodeagent runs it, or tunes a mechanism nodeagent does not need, so
// that no value changes what nodeagent does. Each says why.
var kubeletNoEffect = map[string]string{
	// kubelet rotates container logs from a periodic pass: every
	// containerLogMonitorInterval it lists the running containers and
	// rotates, with containerLogMaxWorkers in parallel, the log files
	// that have grown past containerLogMaxSize, which they may overshoot
	// until the next pass. nodeagent has no such pass: each container's
	// logger process rotates its file as it writes it, at the record that
	// would make it exceed containerLogMaxSize (crilog.Writer), so at
	// any valid value of either field the files and the rotations are
	// the same. Invalid values are refused as kubelet refuses them
	// (kubeletRefused).
	"containerLogMaxWorkers":      "rotation by the container's logger",
	"containerLogMonitorInterval": "rotation by the container's logger",
	// kubelet polls staticPodURL at this period; without staticPodURL
	// (which nodeagent reports unsupported when set) it is unused.
	"httpCheckFrequency": "staticPodURL",
	// Only maxContainerRestartPeriod, which is refused (it needs the
	// KubeletCrashLoopBackOffMax gate, which nodeagent does not honour).
	"crashLoopBackOff": "KubeletCrashLoopBackOffMax",
}

// kubeletLoggingNoEffect are the same for the logging section: the agent
// writes every log line at once (it buffers nothing), as kubelet does when
// its output streams are not split and buffered, which needs the
// LoggingAlphaOptions gate (refused in options).
var kubeletLoggingNoEffect = map[string]bool{"flushFrequency": true, "options": true}

// KubeletSupportedFields lists the KubeletConfiguration fields nodeagent
// uses, sorted.
func KubeletSupportedFields() []string {
	out := slices.Sorted(maps.Keys(kubeletSupported))
	out = append(out, "logging.format", "logging.verbosity")
	sort.Strings(out)
	return out
}

// fromKubelet translates the fields of a schema-checked KubeletConfiguration
// object into the NodeAgentConfiguration schema and names the fields it
// drops. As in kubelet, a zero value of a field that is not a pointer
// (`nodeStatusReportFrequency: 0s`, `maxPods: 0`, as kubeadm writes them)
// means "unset", so the default applies.
func fromKubelet(obj map[string]any) (map[string]any, []string) {
	out := map[string]any{}
	var unsupported []string
	kfields := jsonFields(kubeletType)
	for _, k := range slices.Sorted(maps.Keys(obj)) {
		v := obj[k]
		switch {
		case k == "logging":
			lm, _ := v.(map[string]any)
			sub := map[string]any{}
			lfields := jsonFields(kfields["logging"])
			for _, lk := range slices.Sorted(maps.Keys(lm)) {
				if kubeletLoggingNoEffect[lk] {
					continue
				}
				if !kubeletLoggingSupported[lk] {
					unsupported = append(unsupported, "logging."+lk)
					continue
				}
				if !kubeletZero(lm[lk], lfields[lk]) {
					sub[lk] = lm[lk]
				}
			}
			if len(sub) > 0 {
				out["logging"] = sub
			}
		case k == "featureGates":
			// Checked by featureGateProblems: what is left is kubelet's
			// defaults and the gates nodeagent honours.
			if m, ok := v.(map[string]any); ok {
				kept := map[string]any{}
				for g, gv := range m {
					if gateDetail(g, gv) == "" {
						kept[g] = gv
					}
				}
				if len(kept) > 0 {
					out[k] = kept
				}
			}
		case kubeletNoEffect[k] != "":
		case kubeletSupported[k]:
			if m, ok := v.(map[string]any); ok && kfields[k] != nil && kfields[k].Kind() == reflect.Struct {
				if pruned := pruneKubeletZeros(m, kfields[k]); len(pruned) > 0 {
					out[k] = pruned
				}
			} else if !kubeletZero(v, kfields[k]) {
				out[k] = v
			}
		default:
			unsupported = append(unsupported, k)
		}
	}
	return out, unsupported
}

// kubeletZero reports whether v is the zero value of a non-pointer,
// non-collection kubelet field, which kubelet's defaulting treats as unset.
func kubeletZero(v any, t reflect.Type) bool {
	if v == nil || t == nil {
		return true
	}
	switch t.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Slice:
		return false
	}
	if t == durationT {
		s, _ := v.(string)
		d, err := time.ParseDuration(s)
		return err == nil && d == 0
	}
	switch x := v.(type) {
	case string:
		return x == ""
	case bool:
		return !x
	case json.Number:
		f, err := x.Float64()
		return err == nil && f == 0
	}
	return false
}

// pruneKubeletZeros drops the zero-valued leaves of a nested kubelet
// section (authentication, authorization), which kubelet's defaulting
// treats as unset: kubeadm writes `cacheTTL: 0s` meaning the default.
func pruneKubeletZeros(m map[string]any, t reflect.Type) map[string]any {
	fields := jsonFields(t)
	out := map[string]any{}
	for k, v := range m {
		ft := fields[k]
		if sub, ok := v.(map[string]any); ok && ft != nil && ft.Kind() == reflect.Struct && ft != durationT {
			if p := pruneKubeletZeros(sub, ft); len(p) > 0 {
				out[k] = p
			}
			continue
		}
		if ft == nil || !kubeletZero(v, ft) {
			out[k] = v // unknown keys stay, so that strict decoding names them
		}
	}
	return out
}

// kubeletRefused are KubeletConfiguration fields whose non-default values
// change behaviour a user relies on and that nodeagent does not implement:
// set to such a value, the file is refused with the field's path rather
// than the value ignored (issue 26). Each returns the reason, or "" for a
// value that means kubelet's default. Also here: kubelet's validation of
// fields in kubeletNoEffect, which nodeagent does not otherwise decode.
var kubeletRefused = map[string]func(v any) string{
	"containerLogMaxWorkers":      containerLogMaxWorkersInvalid,
	"containerLogMonitorInterval": containerLogMonitorIntervalInvalid,
	"memoryManagerPolicy":         policyOtherThan("None", "the memory manager (NUMA-pinned memory for Guaranteed pods)"),
}

// kubeletFieldRefusals are the refusals of nested kubelet fields, each a
// function of the whole object returning problems with their paths.
var kubeletFieldRefusals = []func(obj map[string]any) map[string]string{
	refusedCrashLoopBackOff,
	refusedLoggingOptions,
}

// refusedCrashLoopBackOff: kubelet 1.34 refuses
// crashLoopBackOff.maxContainerRestartPeriod without the
// KubeletCrashLoopBackOffMax gate, which nodeagent does not honour
// (featureGateProblems refuses turning it on).
func refusedCrashLoopBackOff(obj map[string]any) map[string]string {
	m, _ := obj["crashLoopBackOff"].(map[string]any)
	if v, ok := m["maxContainerRestartPeriod"]; ok && v != nil {
		return map[string]string{"crashLoopBackOff.maxContainerRestartPeriod": "FeatureGate KubeletCrashLoopBackOffMax not enabled, CrashLoopBackOff.MaxContainerRestartPeriod must not be set (nodeagent does not implement the gate: its crash-loop back-off is kubelet's default, 10s doubling to 5m)"}
	}
	return nil
}

// refusedLoggingOptions: kubelet 1.34 refuses split streams and info
// buffers without the LoggingAlphaOptions gate (its messages), which
// nodeagent does not honour; at their defaults they change nothing.
func refusedLoggingOptions(obj map[string]any) map[string]string {
	lm, _ := obj["logging"].(map[string]any)
	opts, _ := lm["options"].(map[string]any)
	out := map[string]string{}
	for _, format := range []string{"text", "json"} {
		o, _ := opts[format].(map[string]any)
		p := "logging.options." + format
		if b, _ := o["splitStream"].(bool); b {
			out[p+".splitStream"] = "Feature LoggingAlphaOptions is disabled (nodeagent writes its logs to one stream and does not implement the gate)"
		}
		if v, ok := o["infoBufferSize"]; ok && v != nil {
			if q, err := resource.ParseQuantity(fmt.Sprint(v)); err != nil || q.Value() != 0 {
				out[p+".infoBufferSize"] = "Feature LoggingAlphaOptions is disabled (nodeagent buffers no log lines and does not implement the gate)"
			}
		}
	}
	return out
}

// containerLogMaxWorkersInvalid refuses what kubelet's validation refuses
// (with its message): a count under 1. Unset (null) is kubelet's default, 1.
func containerLogMaxWorkersInvalid(v any) string {
	if v == nil {
		return ""
	}
	if n, ok := v.(json.Number); ok {
		if i, err := n.Int64(); err == nil && i >= 1 {
			return ""
		}
	}
	return fmt.Sprintf("Invalid value: %v: containerLogMaxWorkers must be greater than or equal to 1", v)
}

// containerLogMonitorIntervalInvalid refuses what kubelet's validation
// refuses (with its message): an interval under 3s, 0s included (the
// field is a pointer, so 0s is not "unset"). Unset (null) is kubelet's
// default, 10s.
func containerLogMonitorIntervalInvalid(v any) string {
	if v == nil {
		return ""
	}
	if s, ok := v.(string); ok {
		if d, err := time.ParseDuration(s); err == nil && d >= 3*time.Second {
			return ""
		}
	}
	return fmt.Sprintf("Invalid value: %q: containerLogMonitorInterval must be a positive time duration greater than or equal to 3s", fmt.Sprint(v))
}

func policyOtherThan(def, what string) func(v any) string {
	return func(v any) string {
		if s, _ := v.(string); s != "" && s != def {
			return fmt.Sprintf("%s is not supported: nodeagent does not implement %s; remove the field or set it to %s", s, what, def)
		}
		return ""
	}
}

// refusedKubeletFields returns a problem for each field of a
// KubeletConfiguration object that kubeletRefused refuses, sorted.
func refusedKubeletFields(source string, obj map[string]any) []Problem {
	probs := featureGateProblems(source, obj["featureGates"])
	for _, k := range slices.Sorted(maps.Keys(kubeletRefused)) {
		if v, ok := obj[k]; ok {
			if why := kubeletRefused[k](v); why != "" {
				probs = append(probs, Problem{Source: source, Field: k, Detail: why})
			}
		}
	}
	for _, refuse := range kubeletFieldRefusals {
		refused := refuse(obj)
		for _, f := range slices.Sorted(maps.Keys(refused)) {
			probs = append(probs, Problem{Source: source, Field: f, Detail: refused[f]})
		}
	}
	return probs
}
