// Package config loads nodeagent's configuration: a versioned,
// KubeletConfiguration-style YAML file (apiVersion
// config.nodeagent.io/v1alpha1, kind NodeAgentConfiguration) plus an
// optional drop-in directory and command-line flags.
//
// Contract:
//
//   - Decoding is strict. Unknown or wrongly cased fields, duplicate keys,
//     wrong types, YAML syntax errors (with their line), a wrong or missing
//     apiVersion/kind, an empty file, several YAML documents, a directory or
//     an unreadable path are errors naming the file, the field path and the
//     problem, with its line. Load reports every problem at once in an
//     *Error: a file with wrong fields is still validated without them.
//   - An upstream kubelet.config.k8s.io/v1beta1 KubeletConfiguration is
//     accepted: the fields nodeagent shares with kubelet
//     (KubeletSupportedFields) are used, every other field set is named in
//     one warning. Nothing is dropped silently.
//   - Precedence, as kubelet: flags > drop-ins > main file > defaults.
//     Drop-ins are the *.conf files of the drop-in directory in lexical
//     order; each needs apiVersion and kind; each is merged over the
//     defaulted main configuration as a JSON merge patch (KEP-3983):
//     scalars and lists replace, mappings merge key by key, null resets a
//     field to its default.
//   - A field absent from every file has its default (Default); a field
//     present is used as written, even if empty or zero. Relative paths in
//     a file are relative to that file's directory.
//   - The result is validated as a whole (Validate): every error carries its
//     field path in Kubernetes' format and the file or flag that set it.
//   - Watcher re-loads on SIGHUP (Trigger) and on file changes and delivers
//     valid configurations whose live fields (LiveFields) changed; an invalid
//     configuration is logged and the running one stays in force.
//
// The package does no I/O besides reading the configuration files and
// watching their directories; it never contacts the API server.
package config
