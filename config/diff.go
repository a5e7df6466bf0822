package config

import (
	"reflect"
	"strings"
)

// LiveFields are the fields that can change while the agent runs; every
// other field requires a restart.
var LiveFields = []string{
	"nodeLeaseDurationSeconds",
	"nodeStatusUpdateFrequency",
	"nodeStatusReportFrequency",
	"logging.verbosity",
}

// Diff returns the field paths ("pleg.relistPeriod") whose values differ
// between a and b, in declaration order. Nil and empty maps or lists are
// equal.
func Diff(a, b *NodeAgentConfiguration) []string {
	if a == nil || b == nil {
		if a == b {
			return nil
		}
		return []string{""}
	}
	return diffStruct(reflect.ValueOf(*a), reflect.ValueOf(*b), "")
}

// Equal reports whether a and b configure the same thing.
func Equal(a, b *NodeAgentConfiguration) bool { return len(Diff(a, b)) == 0 }

func diffStruct(a, b reflect.Value, prefix string) []string {
	var out []string
	t := a.Type()
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if f.Anonymous {
			if !reflect.DeepEqual(a.Field(i).Interface(), b.Field(i).Interface()) {
				out = append(out, prefix+"apiVersion/kind")
			}
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if isConfigStruct(f.Type) {
			out = append(out, diffStruct(a.Field(i), b.Field(i), prefix+name+".")...)
			continue
		}
		if !equalValue(a.Field(i), b.Field(i)) {
			out = append(out, prefix+name)
		}
	}
	return out
}

func equalValue(a, b reflect.Value) bool {
	switch a.Kind() {
	case reflect.Map, reflect.Slice:
		if a.Len() == 0 && b.Len() == 0 {
			return true
		}
	}
	return reflect.DeepEqual(a.Interface(), b.Interface())
}

// LiveChanges classifies the fields that differ between the running
// configuration and a new one: live ones take effect without a restart,
// the others require one.
func LiveChanges(old, new *NodeAgentConfiguration) (live, requiresRestart []string) {
	for _, f := range Diff(old, new) {
		if isLive(f) {
			live = append(live, f)
		} else {
			requiresRestart = append(requiresRestart, f)
		}
	}
	return live, requiresRestart
}

func isLive(path string) bool {
	for _, f := range LiveFields {
		if f == path {
			return true
		}
	}
	return false
}

// WithLiveChanges returns a copy of running with the live fields taken from
// next: the configuration in force after a reload, since fields that need a
// restart keep their running values until then.
func WithLiveChanges(running, next *NodeAgentConfiguration) *NodeAgentConfiguration {
	out := running.DeepCopy()
	out.NodeLeaseDurationSeconds = next.NodeLeaseDurationSeconds
	out.NodeStatusUpdateFrequency = next.NodeStatusUpdateFrequency
	out.NodeStatusReportFrequency = next.NodeStatusReportFrequency
	out.Logging.Verbosity = next.Logging.Verbosity
	return out
}
