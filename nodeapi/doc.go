// Package nodeapi is the node's HTTPS API, kubelet's server on port 10250:
// the API server proxies `kubectl logs`, exec, attach and port-forward to
// it, and metrics-server reads it.
//
// # What it promises
//
// Every request is authenticated, then authorized, as kubelet does it:
//
//   - A client certificate that chains to Options.ClientCAFile names the
//     user (CN) and groups (O). A certificate that does not verify is
//     rejected with 401.
//   - Otherwise an "Authorization: Bearer" token is checked with a
//     TokenReview (Options.WebhookAuthentication), cached for
//     Options.AuthenticationCacheTTL (answers that the API server could not
//     give are not cached).
//   - Otherwise the request is anonymous: system:anonymous in group
//     system:unauthenticated when Options.Anonymous, else 401.
//   - Authorization (Options.AuthorizationMode Webhook) sends a
//     SubjectAccessReview for verb (GET→get, POST→create, PUT→update,
//     PATCH→patch, DELETE→delete) on resource nodes, name the node, with
//     kubelet's subresource for the path (KubeletFineGrainedAuthz on, as in
//     1.34): /stats→stats, /metrics→metrics, /logs→log,
//     /checkpoint→checkpoint, /pods→pods then proxy, /healthz→healthz then
//     proxy, /configz→configz then proxy, everything else (containerLogs,
//     exec, run, debug/pprof, debug/flags, ...)→proxy. Any allowed subresource lets the request in, else
//     403. Answers are cached (allowed and denied for their own TTLs).
//
// Endpoints: /healthz with kubelet's checks (ping, log: Options.FlushLogs,
// syncloop: Options.Healthy), each also at /healthz/<check>; /pods (a v1 PodList of the pods the agent runs);
// /containerLogs/{namespace}/{pod}/{container} with kubelet's query
// parameters, read from the CRI log files of package crilog under
// Options.LogRoot (podLogsDir: <ns>_<pod>_<uid>/<container>/<attempt>.log
// and its rotated files) or, for containers an older agent started,
// Options.LegacyLogRoots (rootDir/logs, same layout): the newest attempt,
// or with previous=true the one before it; /exec (Options.Exec), /attach (the running attempt's log from
// now on; input to the container's stdin and terminal resizes through
// Options.Attach) and /portForward (dialled inside the pod's network namespace)
// with the SPDY and WebSocket streams of k8s.io/kubelet/pkg/cri/streaming;
// /metrics/resource and /stats/summary (CPU and memory from cgroups, the
// node's filesystem, network counters from /proc/<pid>/net/dev, the pods'
// volumes measured as du at most once a minute, the image filesystem);
// /metrics/cadvisor (cAdvisor's container_* and machine_* families with
// kubelet's labels for the root, pod and running container cgroups, read
// at the scrape and written as text without a registry); /metrics/probes
// (Options.ProbeMetrics); /runningpods/ (the runtime's running
// containers as pods); /configz (Options.Configz); kubelet's debugging
// handlers (Options.Debug, all on by default as in kubelet): /run (one-shot
// exec), /debug/pprof/ (Go's profiles), PUT /debug/flags/v
// (Options.Debug.SetVerbosity), /logs/ (the files under /var/log, and
// with Options.Debug.LogQuery kubelet's node log query: journalctl or a
// file), /checkpoint (checked as kubelet, then the answer
// of a runtime that cannot checkpoint). Each switched off answers kubelet's
// 405 message; without Options.Debug.Handlers, exec, attach, port-forward,
// run, containerLogs, runningpods, pprof and logs answer 405 "Debug
// endpoints are disabled." and configz, checkpoint and flags are absent.
//
// Serving certificate: Options.TLSCertFile/TLSPrivateKeyFile, else a
// self-signed certificate for the node's names and addresses kept in
// Options.CertDir (kubelet.crt, kubelet.key), reused while valid. With
// Options.ServerTLSBootstrap, a certificate from the certificates API
// (kubernetes.io/kubelet-serving) replaces the self-signed one once issued
// and is renewed at 70–90% of its lifetime; a new certificate applies to
// new connections, open ones (a log follow) keep theirs.
//
// # What it assumes
//
// Pods answers from memory without blocking; Containers may call the
// runtime (it is asked at most once a second per following request).
package nodeapi
