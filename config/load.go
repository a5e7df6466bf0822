package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// DropInExtension is the extension of the files read from the drop-in
// directory.
const DropInExtension = ".conf"

// Result is everything Load learns about a configuration.
type Result struct {
	// Config is the effective configuration: defaults, main file, drop-ins
	// and flags, validated.
	Config *NodeAgentConfiguration
	// Warnings are problems that do not stop the agent.
	Warnings []string
	// Origins maps the field paths set by a file or flag to where they were
	// set: a file name or "flag --NAME". A field not in Origins has its
	// default.
	Origins map[string]string
	// Files are the files read, in the order they were applied.
	Files []string
}

// Origin returns where the field at path (as in Result.Origins) got its
// value: the file or flag that set it or its closest parent, or "default".
func (r *Result) Origin(path string) string {
	if o := lookupOrigin(r.Origins, path); o != "" {
		return o
	}
	return "default"
}

// Load reads the main file and the drop-ins, strictly decodes each, merges
// them (flags > drop-ins > main file > defaults, as kubelet), applies the
// defaults and validates the result. On error it returns an *Error listing
// every problem at once (each naming its file and field path); the warnings
// are returned in both cases.
func Load(o LoadOptions) (*NodeAgentConfiguration, []string, error) {
	r, err := LoadDetailed(o)
	if err != nil {
		return nil, r.Warnings, err
	}
	return r.Config, r.Warnings, nil
}

// LoadDetailed is Load, also returning where each field came from. The
// Result is never nil; on error only its Warnings and Files are set.
func LoadDetailed(o LoadOptions) (*Result, error) {
	res := &Result{Origins: map[string]string{}}
	var probs []Problem
	var docs []*document
	// fatal is set when a file cannot be read as a configuration at all;
	// a file with only wrong fields is validated without them, so that
	// every problem is reported at once.
	fatal := false

	if o.Path != "" {
		res.Files = append(res.Files, o.Path)
		doc, p := decodeFile(o.Path)
		probs = append(probs, p...)
		if doc != nil {
			docs = append(docs, doc)
		} else {
			fatal = true
		}
	}
	var dropIns []*document
	if o.DropInDir != "" {
		files, warnings, p := listDropIns(o.DropInDir)
		res.Warnings = append(res.Warnings, warnings...)
		probs = append(probs, p...)
		fatal = fatal || len(p) > 0
		for _, f := range files {
			res.Files = append(res.Files, f)
			doc, p := decodeFile(f)
			probs = append(probs, p...)
			if doc != nil {
				dropIns = append(dropIns, doc)
			} else {
				fatal = true
			}
		}
	}
	if w := unsupportedWarning(append(append([]*document{}, docs...), dropIns...)); w != "" {
		res.Warnings = append(res.Warnings, w)
	}
	if fatal {
		return res, &Error{Problems: probs}
	}

	// The main file over the defaults.
	mainObj := map[string]any{}
	if len(docs) == 1 {
		mainObj = docs[0].obj
		recordOrigins(res.Origins, mainObj, agentType, nil, docs[0].source, true)
	}
	cfg, err := fromObject(mainObj)
	if err != nil {
		return res, &Error{Problems: []Problem{{Source: o.Path, Detail: err.Error(), Err: err}}}
	}
	mergeDefaultEviction(cfg, mainObj)
	// The drop-ins, in lexical order, merged over the defaulted main
	// configuration as JSON merge patches (RFC 7386), as kubelet does:
	// scalars and lists replace, mappings merge key by key, null resets.
	if len(dropIns) > 0 {
		merged, err := toObject(cfg)
		if err != nil {
			return res, &Error{Problems: []Problem{{Detail: err.Error(), Err: err}}}
		}
		for _, d := range dropIns {
			merged = mergePatch(merged, d.obj)
			recordOrigins(res.Origins, d.obj, agentType, nil, d.source, false)
		}
		cfg, err = fromObject(merged)
		if err != nil {
			return res, &Error{Problems: []Problem{{Source: o.DropInDir, Detail: err.Error(), Err: err}}}
		}
	}
	// The flags over everything.
	applyOverrides(cfg, o.Overrides, res.Origins)
	normalize(cfg)

	errs, warnings := Validate(cfg)
	if o.Overrides.KubeletDefaults {
		// Started as kubelet, the agent is the component whose ports
		// Validate warns of: kubelet's healthz port is its own.
		warnings = slices.DeleteFunc(warnings, func(w string) bool {
			return cfg.HealthzPort == 10248 && strings.HasPrefix(w, "healthzPort: 10248 ")
		})
	}
	res.Warnings = append(res.Warnings, warnings...)
	if len(errs) > 0 || len(probs) > 0 {
		lines := map[string]map[string]int{}
		for _, d := range append(docs, dropIns...) {
			lines[d.source] = d.lines
		}
		for _, e := range errs {
			src := lookupOrigin(res.Origins, e.Field)
			probs = append(probs, Problem{Source: src, Line: lineOf(lines[src], e.Field), Field: e.Field, Detail: e.ErrorBody()})
		}
		return res, &Error{Problems: probs}
	}
	res.Config = cfg
	return res, nil
}

// DecodeBytes strictly decodes one configuration file's content (either
// kind), applies the defaults and validates it, without drop-ins, flags or
// relative path resolution. source names the data in problems.
func DecodeBytes(source string, data []byte) (*NodeAgentConfiguration, []string, error) {
	doc, probs := decode(source, data)
	if doc == nil {
		return nil, nil, &Error{Problems: probs}
	}
	var warnings []string
	if w := unsupportedWarning([]*document{doc}); w != "" {
		warnings = append(warnings, w)
	}
	cfg, err := fromObject(doc.obj)
	if err != nil {
		return nil, warnings, &Error{Problems: []Problem{{Source: source, Detail: err.Error(), Err: err}}}
	}
	mergeDefaultEviction(cfg, doc.obj)
	normalize(cfg)
	errs, w := Validate(cfg)
	warnings = append(warnings, w...)
	if len(errs) > 0 || len(probs) > 0 {
		for _, e := range errs {
			probs = append(probs, Problem{Source: source, Line: lineOf(doc.lines, e.Field), Field: e.Field, Detail: e.ErrorBody()})
		}
		return nil, warnings, &Error{Problems: probs}
	}
	return cfg, warnings, nil
}

func decodeFile(path string) (*document, []Problem) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, []Problem{{Source: path, Detail: "cannot read: " + pathErrText(err), Err: err}}
	}
	if fi.IsDir() {
		return nil, []Problem{{Source: path, Detail: "is a directory, not a configuration file"}}
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, []Problem{{Source: path, Detail: "cannot read: " + pathErrText(err), Err: err}}
	}
	doc, probs := decode(path, data)
	if doc != nil {
		resolvePaths(doc.obj, filepath.Dir(path))
	}
	return doc, probs
}

func pathErrText(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}

// listDropIns returns the *.conf files of dir in lexical order. Hidden
// entries (such as a ConfigMap's ..data) and subdirectories are skipped;
// other files are skipped with a warning.
func listDropIns(dir string) ([]string, []string, []Problem) {
	fi, err := os.Stat(dir)
	if err != nil {
		return nil, nil, []Problem{{Source: dir, Detail: "cannot read drop-in directory: " + pathErrText(err), Err: err}}
	}
	if !fi.IsDir() {
		return nil, nil, []Problem{{Source: dir, Detail: "drop-in path is not a directory"}}
	}
	entries, err := os.ReadDir(dir) // sorted by name
	if err != nil {
		return nil, nil, []Problem{{Source: dir, Detail: "cannot read drop-in directory: " + pathErrText(err), Err: err}}
	}
	var files, warnings []string
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, ".") {
			continue
		}
		p := filepath.Join(dir, name)
		st, err := os.Stat(p) // follows symlinks
		if err != nil {
			if e.Type()&fs.ModeSymlink != 0 {
				warnings = append(warnings, fmt.Sprintf("%s: ignoring dangling symlink", p))
			}
			continue
		}
		if st.IsDir() {
			continue
		}
		if filepath.Ext(name) != DropInExtension {
			warnings = append(warnings, fmt.Sprintf("%s: ignored: drop-in files must end in %s", p, DropInExtension))
			continue
		}
		files = append(files, p)
	}
	return files, warnings, nil
}

// unsupportedWarning lists, in one warning, every KubeletConfiguration field
// set in the documents that nodeagent ignores.
func unsupportedWarning(docs []*document) string {
	var parts []string
	for _, d := range docs {
		if d != nil && len(d.unsupported) > 0 {
			parts = append(parts, fmt.Sprintf("%s: %s", d.source, strings.Join(d.unsupported, ", ")))
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return "ignoring KubeletConfiguration fields that nodeagent does not support: " + strings.Join(parts, "; ") +
		" (nodeagent uses only " + strings.Join(KubeletSupportedFields(), ", ") + ")"
}

// pathFields are the fields holding file system paths. In a file, a
// relative path is relative to the file's directory (as kubelet resolves
// paths in its configuration file).
var pathFields = []string{"staticPodPath", "kubeconfig", "bootstrapKubeconfig", "certDir", "rootDir", "resolvConf", "cniConfDir", "imageCredentialProviderConfig", "imageCredentialProviderBinDir"}

func resolvePaths(obj map[string]any, dir string) {
	for _, k := range pathFields {
		if s, ok := obj[k].(string); ok && s != "" && !filepath.IsAbs(s) {
			obj[k] = filepath.Join(dir, s)
		}
	}
}

// fromObject decodes a schema-checked object into a configuration and
// defaults every field the object does not set.
func fromObject(obj map[string]any) (*NodeAgentConfiguration, error) {
	b, err := json.Marshal(withoutNulls(obj))
	if err != nil {
		return nil, fmt.Errorf("encoding merged configuration: %w", err)
	}
	cfg := &NodeAgentConfiguration{}
	if err := json.Unmarshal(b, cfg); err != nil {
		return nil, fmt.Errorf("decoding merged configuration: %w", err)
	}
	def := Default()
	defaultAbsent(reflect.ValueOf(cfg).Elem(), reflect.ValueOf(def).Elem(), obj)
	// As kubelet: the report frequency follows an explicitly set update
	// frequency unless it is set itself.
	if obj["nodeStatusReportFrequency"] == nil && obj["nodeStatusUpdateFrequency"] != nil {
		cfg.NodeStatusReportFrequency = cfg.NodeStatusUpdateFrequency
	}
	cfg.TypeMeta = def.TypeMeta
	return cfg, nil
}

// withoutNulls returns a copy of v without the null members of its
// objects: null means absent (and encoding/json would hand it to the
// UnmarshalJSON of types such as durations).
func withoutNulls(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			if e != nil {
				out[k] = withoutNulls(e)
			}
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = withoutNulls(e)
		}
		return out
	}
	return v
}

// defaultAbsent copies into dst the fields of def whose JSON names are not
// set (absent or null) in obj, recursing into nested configuration structs.
func defaultAbsent(dst, def reflect.Value, obj map[string]any) {
	t := dst.Type()
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if f.Anonymous {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		v := obj[name]
		if v == nil {
			dst.Field(i).Set(def.Field(i))
			continue
		}
		if isConfigStruct(f.Type) {
			if sub, ok := v.(map[string]any); ok {
				defaultAbsent(dst.Field(i), def.Field(i), sub)
			}
		}
	}
}

// isConfigStruct reports whether t is a nested section of the configuration
// (logging, pleg) rather than a value type such as a duration.
func isConfigStruct(t reflect.Type) bool {
	return t.Kind() == reflect.Struct && t != durationT && !reflect.PointerTo(t).Implements(unmarshaler)
}

// toObject encodes a configuration as a generic JSON object.
func toObject(cfg *NodeAgentConfiguration) (map[string]any, error) {
	b, err := json.Marshal(cfg)
	if err != nil {
		return nil, fmt.Errorf("encoding configuration: %w", err)
	}
	var obj map[string]any
	if err := json.Unmarshal(b, &obj); err != nil {
		return nil, fmt.Errorf("decoding configuration: %w", err)
	}
	delete(obj, "apiVersion")
	delete(obj, "kind")
	return obj, nil
}

// mergePatch applies patch to base as an RFC 7386 JSON merge patch and
// returns the result: objects merge key by key, null deletes, everything
// else (scalars, lists) replaces. base is modified.
func mergePatch(base, patch map[string]any) map[string]any {
	if base == nil {
		base = map[string]any{}
	}
	for k, pv := range patch {
		if pv == nil {
			delete(base, k)
			continue
		}
		if pm, ok := pv.(map[string]any); ok {
			bm, _ := base[k].(map[string]any)
			base[k] = mergePatch(bm, pm)
			continue
		}
		base[k] = pv
	}
	return base
}

// recordOrigins notes in origins that source set the fields of obj. A map
// in the main file replaces the default map (replaceMaps); a drop-in's map
// merges key by key, so only its keys are recorded.
func recordOrigins(origins map[string]string, obj map[string]any, t reflect.Type, p *field.Path, source string, replaceMaps bool) {
	fields := jsonFields(t)
	for k, v := range obj {
		ft, ok := fields[k]
		if !ok {
			continue
		}
		cp := p.Child(k)
		if v == nil {
			deleteOrigins(origins, cp.String())
			continue
		}
		m, isMap := v.(map[string]any)
		switch {
		case isMap && isConfigStruct(ft):
			recordOrigins(origins, m, ft, cp, source, replaceMaps)
		case isMap && ft.Kind() == reflect.Map:
			if replaceMaps {
				deleteOrigins(origins, cp.String())
				origins[cp.String()] = source
			}
			for mk, mv := range m {
				if mv == nil {
					delete(origins, cp.Key(mk).String())
				} else {
					origins[cp.Key(mk).String()] = source
				}
			}
		default:
			deleteOrigins(origins, cp.String())
			origins[cp.String()] = source
		}
	}
}

func deleteOrigins(origins map[string]string, path string) {
	for k := range origins {
		if k == path || strings.HasPrefix(k, path+".") || strings.HasPrefix(k, path+"[") {
			delete(origins, k)
		}
	}
}

// lookupOrigin finds where path, or its closest parent, was set.
func lookupOrigin(origins map[string]string, path string) string {
	for path != "" {
		if o, ok := origins[path]; ok {
			return o
		}
		i := strings.LastIndexAny(path, ".[")
		if i <= 0 {
			return ""
		}
		path = path[:i]
	}
	return ""
}

func applyOverrides(cfg *NodeAgentConfiguration, o Overrides, origins map[string]string) {
	if o.Kubeconfig != nil {
		cfg.Kubeconfig = absPath(*o.Kubeconfig)
		origins["kubeconfig"] = "flag --kubeconfig"
	}
	if o.BootstrapKubeconfig != nil {
		cfg.BootstrapKubeconfig = absPath(*o.BootstrapKubeconfig)
		origins["bootstrapKubeconfig"] = "flag --bootstrap-kubeconfig"
	}
	if o.CertDir != nil {
		cfg.CertDir = absPath(*o.CertDir)
		origins["certDir"] = "flag --cert-dir"
	}
	if o.HostnameOverride != nil {
		cfg.HostnameOverride = *o.HostnameOverride
		origins["hostnameOverride"] = "flag --hostname-override"
	}
	if o.NodeIP != nil {
		cfg.NodeIP = *o.NodeIP
		origins["nodeIP"] = "flag --node-ip"
	}
	if o.ImageCredentialProviderConfig != nil {
		cfg.ImageCredentialProviderConfig = absPath(*o.ImageCredentialProviderConfig)
		origins["imageCredentialProviderConfig"] = "flag --image-credential-provider-config"
	}
	if o.ImageCredentialProviderBinDir != nil {
		cfg.ImageCredentialProviderBinDir = absPath(*o.ImageCredentialProviderBinDir)
		origins["imageCredentialProviderBinDir"] = "flag --image-credential-provider-bin-dir"
	}
	if o.Verbosity != nil {
		cfg.Logging.Verbosity = *o.Verbosity
		origins["logging.verbosity"] = "flag -v"
	}
	if o.ContainerRuntimeEndpoint != nil {
		cfg.ContainerRuntimeEndpoint = *o.ContainerRuntimeEndpoint
		origins["containerRuntimeEndpoint"] = "flag --container-runtime-endpoint"
	}
	if o.NodeLabels != nil {
		// As kubelet: the flag's labels are added to the file's.
		if cfg.NodeLabels == nil {
			cfg.NodeLabels = map[string]string{}
		}
		for k, v := range o.NodeLabels {
			cfg.NodeLabels[k] = v
		}
		origins["nodeLabels"] = "flag --node-labels"
	}
	if o.RegisterWithTaints != nil {
		cfg.RegisterWithTaints = o.RegisterWithTaints
		origins["registerWithTaints"] = "flag --register-with-taints"
	}
	if o.ProviderID != nil {
		cfg.ProviderID = *o.ProviderID
		origins["providerID"] = "flag --provider-id"
	}
	if o.RootDir != nil {
		cfg.RootDir = absPath(*o.RootDir)
		origins["rootDir"] = "flag --root-dir"
	}
	if o.KubeletDefaults {
		for path, set := range kubeletDefaults {
			if lookupOrigin(origins, path) == "" {
				set(cfg)
				origins[path] = "kubelet's default"
			}
		}
	}
}

// kubeletDefaults are kubelet's defaults of the fields where nodeagent's
// own differ and that a node set up for kubelet relies on: the agent
// started as kubelet uses them for fields no file or flag sets.
var kubeletDefaults = map[string]func(*NodeAgentConfiguration){
	// kubelet's --root-dir: its certificates (certDir), pods' volumes and
	// the files kubeadm writes live under it.
	"rootDir": func(c *NodeAgentConfiguration) { c.RootDir = "/var/lib/kubelet" },
	// kubelet's healthz port, which kubeadm join polls.
	"healthzPort": func(c *NodeAgentConfiguration) { c.HealthzPort = 10248 },
}

// KubeletDefaults lists the fields whose default is kubelet's when the
// agent runs as kubelet (Overrides.KubeletDefaults), sorted.
func KubeletDefaults() []string {
	return slices.Sorted(maps.Keys(kubeletDefaults))
}

// normalize makes values canonical the way kubelet does: the node name is
// trimmed and lower-cased.
func normalize(cfg *NodeAgentConfiguration) {
	cfg.HostnameOverride = strings.ToLower(strings.TrimSpace(cfg.HostnameOverride))
}

func absPath(p string) string {
	if p == "" || filepath.IsAbs(p) {
		return p
	}
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return p
}
