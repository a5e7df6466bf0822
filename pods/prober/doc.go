// Package prober runs containers' liveness, readiness and startup probes
// and their lifecycle hooks with kubelet's semantics.
//
// Probes (Manager): exec in the container through the runtime (with
// timeoutSeconds; a command still running then fails the probe), httpGet
// (http or https without certificate verification, port by number or
// name, host default the pod IP, httpHeaders, User-Agent
// "kube-probe/1.34", redirects followed to the same host only, 2xx success,
// 3xx success with a ProbeWarning event, the body read up to 10KB),
// tcpSocket and grpc (grpc.health.v1 Health/Check). Each probe of each
// container has its own goroutine on its own period (initialDelaySeconds,
// periodSeconds); a result is published once it came successThreshold or
// failureThreshold times in a row. A startup probe gates the other two
// (they run once it succeeded); a liveness or startup failure is held
// until the container is replaced. Readiness starts False, liveness True,
// startup Unknown for every new attempt. Failed probes record an
// "Unhealthy" Event ("Liveness probe failed: <output>"). A changed result
// calls Options.OnChange so the pod's worker syncs at once.
//
// Hooks (HookRunner): postStart and preStop exec, httpGet (any response
// is success; User-Agent "kube-lifecycle/1.34") and sleep, with kubelet's
// failure messages. The caller bounds them with its context.
package prober
