package config

import (
	"bytes"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"sigs.k8s.io/yaml"
)

// DefaultsYAML returns the default configuration as a complete YAML file
// with a comment on every field. It decodes to Default().
func DefaultsYAML() []byte {
	info := map[string]FieldInfo{}
	for _, f := range Fields() {
		info[f.Path] = f
	}
	var b bytes.Buffer
	b.WriteString("# nodeagent configuration with every field at its default.\n")
	b.WriteString("# Field names follow kubelet's KubeletConfiguration where the meaning is the same.\n")
	b.WriteString("# A field left out takes its default; see docs/configuration.md.\n")
	render(&b, Default(), func(path string) []string {
		f := info[path]
		lines := wrap(f.Meaning, 76)
		note := "Type " + f.Type + "."
		if f.Live {
			note += " Changes without a restart."
		} else {
			note += " Changes need a restart."
		}
		return append(lines, note)
	})
	return b.Bytes()
}

// EffectiveYAML renders the configuration of r, noting above each field
// that is not at its default the file or flag that set it.
func EffectiveYAML(r *Result) []byte {
	var b bytes.Buffer
	b.WriteString("# Effective nodeagent configuration (flags > drop-ins > main file > defaults).\n")
	if len(r.Files) > 0 {
		b.WriteString("# Files read, in order: " + strings.Join(r.Files, ", ") + "\n")
	}
	render(&b, r.Config, func(path string) []string {
		var sources []string
		for k, o := range r.Origins {
			if k == path || strings.HasPrefix(k, path+"[") {
				sources = append(sources, o)
			}
		}
		if len(sources) == 0 {
			return nil
		}
		// In the order they were applied; flags last.
		rank := func(s string) int {
			if i := slices.Index(r.Files, s); i >= 0 {
				return i
			}
			return len(r.Files)
		}
		slices.SortFunc(sources, func(a, b string) int {
			if ra, rb := rank(a), rank(b); ra != rb {
				return ra - rb
			}
			return strings.Compare(a, b)
		})
		return []string{"from " + strings.Join(slices.Compact(sources), ", ")}
	})
	return b.Bytes()
}

// render writes cfg as YAML in declaration order, each field preceded by
// the comment lines comment returns for its path.
func render(b *bytes.Buffer, cfg *NodeAgentConfiguration, comment func(path string) []string) {
	fmt.Fprintf(b, "apiVersion: %s\nkind: %s\n", APIVersion, Kind)
	renderStruct(b, reflect.ValueOf(*cfg), "", "", comment)
}

func renderStruct(b *bytes.Buffer, v reflect.Value, prefix, indent string, comment func(string) []string) {
	t := v.Type()
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if f.Anonymous {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		path := prefix + name
		if isConfigStruct(f.Type) {
			b.WriteString("\n" + indent + name + ":\n")
			renderStruct(b, v.Field(i), path+".", indent+"  ", comment)
			continue
		}
		if lines := comment(path); len(lines) > 0 {
			if indent == "" {
				b.WriteString("\n")
			}
			for _, l := range lines {
				b.WriteString(indent + "# " + l + "\n")
			}
		}
		val := v.Field(i).Interface()
		if v.Field(i).Kind() == reflect.Map && v.Field(i).Len() == 0 {
			val = map[string]string{}
		}
		if v.Field(i).Kind() == reflect.Slice && v.Field(i).Len() == 0 {
			val = []string{}
		}
		out, err := yaml.Marshal(val)
		if err != nil {
			out = []byte(fmt.Sprintf("null # cannot encode: %v\n", err))
		}
		s := strings.TrimRight(string(out), "\n")
		k := v.Field(i).Kind()
		block := (k == reflect.Map || k == reflect.Slice) && v.Field(i).Len() > 0
		if !block && !strings.Contains(s, "\n") {
			b.WriteString(indent + name + ": " + s + "\n")
			continue
		}
		b.WriteString(indent + name + ":\n")
		for _, l := range strings.Split(s, "\n") {
			b.WriteString(indent + "  " + l + "\n")
		}
	}
}

// wrap splits s into lines of at most width characters at spaces.
func wrap(s string, width int) []string {
	var lines []string
	var cur strings.Builder
	for _, w := range strings.Fields(s) {
		if cur.Len() > 0 && cur.Len()+1+len(w) > width {
			lines = append(lines, cur.String())
			cur.Reset()
		}
		if cur.Len() > 0 {
			cur.WriteByte(' ')
		}
		cur.WriteString(w)
	}
	if cur.Len() > 0 {
		lines = append(lines, cur.String())
	}
	return lines
}
