// Package source delivers the pods the node should run.
//
// StaticSource watches the staticPodPath directory (kubelet's file source):
// *.yaml, *.yml and *.json manifests, decoded strictly, defaulted as the
// API server would (SetDefaults) and validated (ValidatePod); each pod's UID
// is a hash of its content, so an edit gives a new pod. It publishes whole
// snapshots. A file that cannot be used is reported once per content and
// skipped; a good earlier version of it keeps running.
//
// APISource follows the pods bound to this node in the API server and calls
// a Handler; mirror pods are told apart from desired pods. It takes no pod
// before the Node informer has synced, as kubelet.
package source
