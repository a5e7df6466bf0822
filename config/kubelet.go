package config

import (
	"encoding/json"
	"reflect"
	"sort"
	"time"
)

// kubeletSupported are the KubeletConfiguration fields nodeagent uses, with
// the same name, type and meaning in NodeAgentConfiguration. Every other
// field set in a KubeletConfiguration file is reported as unsupported.
var kubeletSupported = map[string]bool{
	"nodeLeaseDurationSeconds":         true,
	"nodeStatusUpdateFrequency":        true,
	"nodeStatusReportFrequency":        true,
	"nodeStatusMaxImages":              true,
	"containerRuntimeEndpoint":         true,
	"staticPodPath":                    true,
	"maxPods":                          true,
	"systemReserved":                   true,
	"kubeReserved":                     true,
	"evictionHard":                     true,
	"evictionPressureTransitionPeriod": true,
	"healthzBindAddress":               true,
	"healthzPort":                      true,
	"registerWithTaints":               true,
	"providerID":                       true,
	"clusterDNS":                       true,
	"clusterDomain":                    true,
	"resolvConf":                       true,
}

// kubeletLoggingSupported are the fields of KubeletConfiguration.logging
// nodeagent uses.
var kubeletLoggingSupported = map[string]bool{"format": true, "verbosity": true}

// KubeletSupportedFields lists the KubeletConfiguration fields nodeagent
// uses, sorted.
func KubeletSupportedFields() []string {
	out := sortedKeys(kubeletSupported)
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
	for _, k := range sortedKeys(obj) {
		v := obj[k]
		switch {
		case k == "logging":
			lm, _ := v.(map[string]any)
			sub := map[string]any{}
			lfields := jsonFields(kfields["logging"])
			for _, lk := range sortedKeys(lm) {
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
		case kubeletSupported[k]:
			if !kubeletZero(v, kfields[k]) {
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
