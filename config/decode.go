package config

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	"sigs.k8s.io/yaml"

	"github.com/nodeagent/nodeagent/internal/yamldoc"
)

// document is one decoded configuration file, translated to the
// NodeAgentConfiguration schema as a generic JSON object.
type document struct {
	source string
	kind   string
	// obj holds the fields set in the file (apiVersion and kind removed),
	// in the NodeAgentConfiguration schema.
	obj map[string]any
	// unsupported lists the KubeletConfiguration fields set in the file
	// that nodeagent does not support (kubelet files only).
	unsupported []string
	// lines maps field paths to their line in the file.
	lines map[string]int
}

var (
	agentType   = reflect.TypeOf(NodeAgentConfiguration{})
	kubeletType = reflect.TypeOf(kubeletv1beta1.KubeletConfiguration{})
	durationT   = reflect.TypeOf(metav1.Duration{})
	unmarshaler = reflect.TypeOf((*json.Unmarshaler)(nil)).Elem()
)

// decode strictly decodes one configuration file's content. source names
// the file in problems. It returns the fields the file sets, in the
// NodeAgentConfiguration schema, and the KubeletConfiguration fields it
// ignores. If the file cannot be read as a configuration at all the
// document is nil; if only some fields are wrong, the document holds the
// others. It never panics, whatever data holds.
func decode(source string, data []byte) (*document, []Problem) {
	fail := func(field, detail string, err error) (*document, []Problem) {
		return nil, []Problem{{Source: source, Field: field, Detail: detail, Err: err}}
	}
	if n, err := yamldoc.Count(data, 1); err != nil {
		return fail("", "YAML syntax error: "+trimYAMLError(err), err)
	} else if n > 1 {
		return fail("", fmt.Sprintf("found %d YAML documents; a configuration file holds exactly one", n), nil)
	}
	j, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		return fail("", "YAML error: "+trimYAMLError(err), err)
	}
	var top any
	dec := json.NewDecoder(bytes.NewReader(j))
	dec.UseNumber()
	if err := dec.Decode(&top); err != nil {
		return fail("", "cannot decode: "+err.Error(), err)
	}
	if top == nil {
		return fail("", "file is empty; a configuration needs at least apiVersion: "+APIVersion+" and kind: "+Kind, nil)
	}
	obj, ok := top.(map[string]any)
	if !ok {
		return fail("", fmt.Sprintf("the top level must be a mapping with apiVersion and kind, found %s", jsonKind(top)), nil)
	}

	lines := lineIndex(data)
	withLines := func(probs []Problem) []Problem {
		for i := range probs {
			probs[i].Line = lineOf(lines, probs[i].Field)
		}
		return probs
	}
	kind, probs := checkTypeMeta(source, obj)
	if len(probs) > 0 {
		return nil, withLines(probs)
	}
	delete(obj, "apiVersion")
	delete(obj, "kind")

	schema := agentType
	if kind == KubeletKind {
		schema = kubeletType
	}
	// Schema problems are returned with the document, from which the
	// offending fields have been pruned, so that the rest can still be
	// validated and every problem reported at once.
	for _, e := range checkSchema(obj, schema, nil) {
		probs = append(probs, Problem{Source: source, Field: e.field, Detail: e.detail})
	}
	doc := &document{source: source, kind: kind, obj: obj, lines: lines}
	if kind == KubeletKind {
		refused := refusedKubeletFields(source, obj)
		probs = append(probs, refused...)
		doc.obj, doc.unsupported = fromKubelet(obj)
		// A refused field is an error, not also a warning.
		doc.unsupported = slices.DeleteFunc(doc.unsupported, func(f string) bool {
			return slices.ContainsFunc(refused, func(p Problem) bool { return p.Field == f })
		})
	}
	return doc, withLines(probs)
}

func trimYAMLError(err error) string {
	s := err.Error()
	s = strings.TrimPrefix(s, "error converting YAML to JSON: ")
	s = strings.TrimPrefix(s, "yaml: ")
	s = strings.TrimPrefix(s, "unmarshal errors:\n")
	var lines []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	return strings.Join(lines, "; ")
}

// checkTypeMeta returns the file's kind, or problems naming apiVersion or
// kind.
func checkTypeMeta(source string, obj map[string]any) (string, []Problem) {
	supported := []string{APIVersion, KubeletAPIVersion}
	av, avOK := obj["apiVersion"].(string)
	k, kOK := obj["kind"].(string)
	var probs []Problem
	add := func(e *field.Error) {
		probs = append(probs, Problem{Source: source, Field: e.Field, Detail: e.ErrorBody()})
	}
	switch {
	case obj["apiVersion"] == nil:
		add(field.Required(field.NewPath("apiVersion"), "must be "+APIVersion+" (or "+KubeletAPIVersion+")"))
	case !avOK:
		add(field.Invalid(field.NewPath("apiVersion"), obj["apiVersion"], "must be a string"))
	case av != APIVersion && av != KubeletAPIVersion:
		add(field.NotSupported(field.NewPath("apiVersion"), av, supported))
	}
	want := Kind
	if av == KubeletAPIVersion {
		want = KubeletKind
	}
	switch {
	case obj["kind"] == nil:
		add(field.Required(field.NewPath("kind"), "must be "+want))
	case !kOK:
		add(field.Invalid(field.NewPath("kind"), obj["kind"], "must be a string"))
	case (avOK && (av == APIVersion || av == KubeletAPIVersion)) && k != want:
		add(field.NotSupported(field.NewPath("kind"), k, []string{want}))
	case !avOK && k != Kind && k != KubeletKind:
		add(field.NotSupported(field.NewPath("kind"), k, []string{Kind, KubeletKind}))
	}
	if len(probs) > 0 {
		return "", probs
	}
	return k, nil
}

type schemaError struct{ field, detail string }

func pathString(p *field.Path) string {
	if p == nil {
		return ""
	}
	return p.String()
}

// checkSchema checks that v, a value decoded from JSON with UseNumber,
// matches the Go type t exactly: every key names a field (case-sensitively),
// and every value has the right JSON type and range. It reports every
// mismatch with its field path. JSON null is accepted anywhere (absent).
func checkSchema(v any, t reflect.Type, p *field.Path) []schemaError {
	if v == nil {
		return nil
	}
	invalid := func(detail string) []schemaError {
		return []schemaError{{field: pathString(p), detail: field.Invalid(p, displayValue(v), detail).ErrorBody()}}
	}
	if t == durationT {
		s, ok := v.(string)
		if !ok {
			return invalid(`must be a duration string such as "10s", "5m" or "1h30m"`)
		}
		if _, err := time.ParseDuration(s); err != nil {
			return invalid(`must be a duration such as "10s", "5m" or "1h30m"`)
		}
		return nil
	}
	if t.Kind() != reflect.Pointer && reflect.PointerTo(t).Implements(unmarshaler) {
		b, err := json.Marshal(v)
		if err != nil {
			return invalid(err.Error())
		}
		u := reflect.New(t).Interface().(json.Unmarshaler)
		if err := u.UnmarshalJSON(b); err != nil {
			return invalid(err.Error())
		}
		return nil
	}
	switch t.Kind() {
	case reflect.Pointer:
		return checkSchema(v, t.Elem(), p)
	case reflect.Interface:
		return nil
	case reflect.Struct:
		m, ok := v.(map[string]any)
		if !ok {
			return invalid("must be a mapping (object)")
		}
		fields := jsonFields(t)
		var errs []schemaError
		for _, k := range slices.Sorted(maps.Keys(m)) {
			ft, ok := fields[k]
			if !ok {
				detail := "unknown field"
				if s := suggest(k, fields); s != "" {
					detail += fmt.Sprintf(" (did you mean %q?)", s)
				}
				errs = append(errs, schemaError{field: pathString(p.Child(k)), detail: detail})
				delete(m, k)
				continue
			}
			e := checkSchema(m[k], ft, p.Child(k))
			errs = append(errs, e...)
			if unusable(e, ft, p.Child(k)) {
				delete(m, k) // prune, so the rest can still be validated
			}
		}
		return errs
	case reflect.Map:
		m, ok := v.(map[string]any)
		if !ok {
			return invalid("must be a mapping (object)")
		}
		var errs []schemaError
		for _, k := range slices.Sorted(maps.Keys(m)) {
			e := checkSchema(m[k], t.Elem(), p.Key(k))
			errs = append(errs, e...)
			if unusable(e, t.Elem(), p.Key(k)) {
				delete(m, k)
			}
		}
		return errs
	case reflect.Slice, reflect.Array:
		l, ok := v.([]any)
		if !ok {
			return invalid("must be a list")
		}
		var errs []schemaError
		for i, e := range l {
			errs = append(errs, checkSchema(e, t.Elem(), p.Index(i))...)
		}
		return errs
	case reflect.String:
		switch v.(type) {
		case string:
			return nil
		case bool:
			return invalid("must be a string; YAML reads unquoted yes, no, on, off, true and false as booleans: quote the value")
		case json.Number:
			return invalid(fmt.Sprintf("must be a string (quote it: \"%v\")", v))
		}
		return invalid("must be a string")
	case reflect.Bool:
		if _, ok := v.(bool); !ok {
			return invalid("must be a boolean (true or false)")
		}
		return nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n, ok := v.(json.Number)
		if !ok {
			return invalid("must be an integer")
		}
		i, err := strconv.ParseInt(string(n), 10, 64)
		if err != nil {
			return invalid("must be an integer")
		}
		if reflect.Zero(t).OverflowInt(i) {
			return invalid(fmt.Sprintf("out of range for a %d-bit integer", t.Bits()))
		}
		return nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		n, ok := v.(json.Number)
		if !ok {
			return invalid("must be a non-negative integer")
		}
		u, err := strconv.ParseUint(string(n), 10, 64)
		if err != nil {
			return invalid("must be a non-negative integer")
		}
		if reflect.Zero(t).OverflowUint(u) {
			return invalid(fmt.Sprintf("out of range for an unsigned %d-bit integer", t.Bits()))
		}
		return nil
	case reflect.Float32, reflect.Float64:
		n, ok := v.(json.Number)
		if !ok {
			return invalid("must be a number")
		}
		if _, err := n.Float64(); err != nil {
			return invalid("must be a number")
		}
		return nil
	}
	return invalid(fmt.Sprintf("unsupported type %s", t))
}

// unusable reports whether a value with the schema errors errs must be
// pruned from its parent: its own type is wrong, or it is a list with a
// wrong element. A mapping with wrong entries has pruned them itself.
func unusable(errs []schemaError, t reflect.Type, p *field.Path) bool {
	if len(errs) == 0 {
		return false
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() == reflect.Slice || t.Kind() == reflect.Array {
		return true
	}
	path := pathString(p)
	for _, e := range errs {
		if e.field == path {
			return true
		}
	}
	return false
}

// jsonFields maps the JSON names of t's fields to their types; inline and
// embedded structs are flattened.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if f.Anonymous && (name == "" || strings.Contains(opts, "inline")) {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				for k, v := range jsonFields(ft) {
					out[k] = v
				}
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = f.Type
	}
	return out
}

// suggest returns the known field closest to an unknown key: the same name
// in another case, or the nearest one at edit distance ≤ 2.
func suggest(key string, fields map[string]reflect.Type) string {
	best, bestD := "", 3
	for _, name := range slices.Sorted(maps.Keys(fields)) {
		if strings.EqualFold(name, key) {
			return name
		}
		if d := editDistance(key, name); d < bestD {
			best, bestD = name, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance; long strings are not compared.
func editDistance(a, b string) int {
	if len(a) > 64 || len(b) > 64 {
		return max(len(a), len(b))
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

func jsonKind(v any) string {
	switch v.(type) {
	case map[string]any:
		return "a mapping"
	case []any:
		return "a list"
	case string:
		return "a string"
	case json.Number:
		return "a number"
	case bool:
		return "a boolean"
	}
	return "null"
}

// displayValue makes decoded JSON values print naturally in messages.
func displayValue(v any) any {
	switch x := v.(type) {
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return i
		}
		if f, err := x.Float64(); err == nil {
			return f
		}
		return string(x)
	case map[string]any, []any:
		b, err := json.Marshal(x)
		if err != nil {
			return fmt.Sprint(x)
		}
		if len(b) > 80 {
			return string(b[:77]) + "..."
		}
		return string(b)
	}
	return v
}
