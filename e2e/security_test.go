package e2e

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodeagent/nodeagent/internal/testing/testimage"
)

// A pod under the restricted PodSecurity profile (what the upstream e2e
// framework gives every pod) runs with its user and groups, no_new_privs,
// no capabilities, containerd's default seccomp profile, a read-only root
// filesystem and its sysctls; a container without a securityContext keeps
// kubelet's defaults (root, escalation allowed, unconfined). The process's
// own /proc/self/status (of cat, which inherits all of it) is the witness.
func TestSecurityContext(t *testing.T) {
	t.Parallel()
	a, _ := readyPodAgent(t, "")
	ctx := context.Background()
	name := a.node + "-sec"
	status := `cat /proc/self/status; touch /probe && echo touch=ok || echo touch=failed; ` +
		`f=/data/$(cat /proc/sys/kernel/random/uuid); touch $f && ls -lnd /data $f; ` +
		`echo shm=$(cat /proc/sys/kernel/shm_rmid_forced) ports=$(cat /proc/sys/net/ipv4/ip_local_port_range); echo end=1; exec sleep 3600`
	kubectl(t, a.env, podYAML(name, a.node, fmt.Sprintf(`  volumes:
  - name: data
    emptyDir: {}
  securityContext:
    runAsGroup: 3000
    fsGroup: 2000
    supplementalGroups: [4000]
    seccompProfile: {type: RuntimeDefault}
    sysctls:
    - {name: kernel.shm_rmid_forced, value: "1"}
    - {name: net.ipv4.ip_local_port_range, value: "20000 30000"}
  containers:
  - name: restricted
    image: %[1]s
    command: ["sh", "-c", %[2]q]
    volumeMounts: [{name: data, mountPath: /data}]
    securityContext:
      runAsUser: 1000
      runAsNonRoot: true
      allowPrivilegeEscalation: false
      readOnlyRootFilesystem: true
      capabilities: {drop: [ALL]}
  - name: rootcaps
    image: %[1]s
    command: ["sh", "-c", %[2]q]
    volumeMounts: [{name: data, mountPath: /data}]
    securityContext:
      runAsUser: 0
      capabilities: {drop: [ALL], add: [NET_BIND_SERVICE]}
      seccompProfile: {type: Unconfined}
  - name: defaults
    image: %[1]s
    command: ["sh", "-c", %[2]q]
    volumeMounts: [{name: data, mountPath: /data}]
`, testimage.Ref, status)), "apply", "-f", "-")
	p := a.waitPod(ctx, name, 60*time.Second, "running", running)

	got := a.waitLog(p, "restricted", 0, "end=1")
	for _, w := range []string{"Uid:\t1000\t1000\t1000\t1000", "Gid:\t3000\t3000\t3000\t3000", "Groups:\t2000 3000 4000",
		"NoNewPrivs:\t1", "Seccomp:\t2", "CapEff:\t0000000000000000", "touch=failed", "shm=1 ports=20000 30000"} {
		if !strings.Contains(got, w) {
			t.Errorf("restricted container: %q missing from\n%s", w, got)
		}
	}
	// The emptyDir belongs to the fsGroup (setgid), and so does a file the
	// container makes in it.
	var dirOK, fileOK bool
	for _, l := range strings.Split(got, "\n") {
		f := strings.Fields(l)
		if len(f) < 7 {
			continue
		}
		f = f[3:] // CRI log prefix: time, stream, tag
		dirOK = dirOK || (f[0] == "drwxrwsrwx" && f[3] == "2000" && strings.HasSuffix(l, " /data"))
		fileOK = fileOK || (strings.HasPrefix(f[0], "-") && f[2] == "1000" && f[3] == "2000")
	}
	if !dirOK || !fileOK {
		t.Errorf("emptyDir not owned by the fsGroup (dir %v, file %v):\n%s", dirOK, fileOK, got)
	}
	got = a.waitLog(p, "rootcaps", 0, "end=1")
	for _, w := range []string{"Uid:\t0\t0\t0\t0", "Gid:\t3000", "CapEff:\t0000000000000400", "CapBnd:\t0000000000000400",
		"Seccomp:\t0", "NoNewPrivs:\t0", "touch=ok"} {
		if !strings.Contains(got, w) {
			t.Errorf("rootcaps container: %q missing from\n%s", w, got)
		}
	}
	// No securityContext of its own: the pod's group and seccomp profile,
	// the image's user, containerd's default capabilities.
	got = a.waitLog(p, "defaults", 0, "end=1")
	for _, w := range []string{"Uid:\t0\t0\t0\t0", "Gid:\t3000", "Groups:\t2000 3000 4000", "Seccomp:\t2", "NoNewPrivs:\t0",
		"CapEff:\t00000000a80425fb", "touch=ok"} {
		if !strings.Contains(got, w) {
			t.Errorf("defaults container: %q missing from\n%s", w, got)
		}
	}
}

// runAsNonRoot with an image that runs as root: the container is not
// created, it waits in CreateContainerConfigError with kubelet's message,
// and a Failed event says why.
func TestRunAsNonRootRefusesRootImage(t *testing.T) {
	t.Parallel()
	a, _ := readyPodAgent(t, "")
	ctx := context.Background()
	name := a.node + "-nonroot"
	kubectl(t, a.env, podYAML(name, a.node, fmt.Sprintf(`  securityContext:
    runAsNonRoot: true
  containers:
  - name: c
    image: %s
    command: ["sleep", "3600"]
`, testimage.Ref)), "apply", "-f", "-")
	p := a.waitPod(ctx, name, 30*time.Second, "CreateContainerConfigError", func(p *corev1.Pod) bool {
		return len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].State.Waiting != nil &&
			p.Status.ContainerStatuses[0].State.Waiting.Reason == "CreateContainerConfigError"
	})
	want := fmt.Sprintf(`container has runAsNonRoot and image will run as root (pod: "%s_default(%s)", container: c)`, name, p.UID)
	if got := p.Status.ContainerStatuses[0].State.Waiting.Message; got != want {
		t.Errorf("message %q, want %q", got, want)
	}
	if p.Status.Phase != corev1.PodPending {
		t.Errorf("phase %s, want Pending", p.Status.Phase)
	}
	a.waitEvent(ctx, "default", "involvedObject.name="+name, "a Failed event", func(e corev1.Event) bool {
		return e.Reason == "Failed" && strings.Contains(e.Message, "runAsNonRoot")
	})
}

// Admission: a sysctl outside the safe set and a Windows pod are rejected
// with kubelet's reasons and messages.
func TestSecurityAdmission(t *testing.T) {
	t.Parallel()
	a, _ := readyPodAgent(t, "allowedUnsafeSysctls: [\"kernel.msg*\"]\n")
	ctx := context.Background()
	for _, tc := range []struct {
		suffix, body, reason, message string
	}{
		{"unsafe", `  securityContext:
    sysctls: [{name: kernel.sem, value: "250 32000 32 128"}]
`, "SysctlForbidden", `Pod was rejected: forbidden sysctl: "kernel.sem" not allowlisted`},
		{"windows", `  os: {name: windows}
`, "PodOSNotSupported", "Pod was rejected: Failed to admit pod as the OS field doesn't match node OS"},
	} {
		name := a.node + "-" + tc.suffix
		kubectl(t, a.env, podYAML(name, a.node, tc.body+fmt.Sprintf(`  containers:
  - name: c
    image: %s
    command: ["sleep", "3600"]
`, testimage.Ref)), "apply", "-f", "-")
		p := a.waitPod(ctx, name, 30*time.Second, "phase Failed", phaseIs(corev1.PodFailed))
		if p.Status.Reason != tc.reason || p.Status.Message != tc.message {
			t.Errorf("%s: reason %q message %q, want %q %q", name, p.Status.Reason, p.Status.Message, tc.reason, tc.message)
		}
	}
	// An allowed unsafe sysctl (allowedUnsafeSysctls) is set.
	name := a.node + "-allowed"
	kubectl(t, a.env, podYAML(name, a.node, fmt.Sprintf(`  securityContext:
    sysctls: [{name: kernel.msgmax, value: "12345"}]
  containers:
  - name: c
    image: %s
    command: ["sh", "-c", "echo msgmax=$(cat /proc/sys/kernel/msgmax); exec sleep 3600"]
`, testimage.Ref)), "apply", "-f", "-")
	p := a.waitPod(ctx, name, 30*time.Second, "running", running)
	a.waitLog(p, "c", 0, "msgmax=12345")
}

// hostPID shows the host's processes (the agent's own); a privileged
// container has every capability and writable sysfs; hostIPC shares the
// host's IPC namespace.
func TestHostNamespacesAndPrivileged(t *testing.T) {
	t.Parallel()
	a, _ := readyPodAgent(t, "")
	ctx := context.Background()
	name := a.node + "-host"
	agentPID := a.cmd.Process.Pid
	kubectl(t, a.env, podYAML(name, a.node, fmt.Sprintf(`  hostPID: true
  hostIPC: true
  containers:
  - name: c
    image: %s
    command: ["sh", "-c", "test -d /proc/%d && echo agent=seen; ls -l /proc/self/ns/ipc; cat /proc/self/status; cat /proc/mounts; echo end=1; exec sleep 3600"]
    securityContext: {privileged: true}
`, testimage.Ref, agentPID)), "apply", "-f", "-")
	p := a.waitPod(ctx, name, 30*time.Second, "running", running)
	got := a.waitLog(p, "c", 0, "end=1")
	if !strings.Contains(got, "agent=seen") {
		t.Errorf("the agent's pid %d is not visible with hostPID:\n%s", agentPID, got)
	}
	if !strings.Contains(got, "Seccomp:\t0") || strings.Contains(got, "CapEff:\t0000000000000000") || strings.Contains(got, "CapEff:\t00000000a80425fb") {
		t.Errorf("privileged container without all capabilities or with seccomp:\n%s", got)
	}
	if !strings.Contains(got, "sysfs /sys sysfs rw") {
		t.Errorf("sysfs not writable in a privileged container:\n%s", got)
	}
	hostIPC, err := os.Readlink("/proc/self/ns/ipc")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(got, "-> "+hostIPC) {
		t.Errorf("IPC namespace is not the host's %s:\n%s", hostIPC, got)
	}
}

// runtimeClassName: a RuntimeClass whose handler is in runtimeHandlers runs
// the pod on that runtime; one whose handler is not leaves the pod Pending
// with a FailedCreatePodSandBox event naming the handler (as containerd).
func TestRuntimeClass(t *testing.T) {
	t.Parallel()
	a, _ := readyPodAgent(t, "runtimeHandlers: {test-handler: io.containerd.runc.v2}\n")
	ctx := context.Background()
	for _, rc := range []struct{ name, handler string }{{a.node + "-ok", "test-handler"}, {a.node + "-missing", a.node + "-handler"}} {
		kubectl(t, a.env, fmt.Sprintf("apiVersion: node.k8s.io/v1\nkind: RuntimeClass\nmetadata: {name: %s}\nhandler: %s\n", rc.name, rc.handler), "apply", "-f", "-")
		t.Cleanup(func() { kubectl(t, a.env, "", "delete", "runtimeclass", rc.name, "--ignore-not-found") })
	}
	run := func(suffix, class string) string {
		name := a.node + "-" + suffix
		kubectl(t, a.env, podYAML(name, a.node, fmt.Sprintf(`  runtimeClassName: %s
  restartPolicy: Never
  containers:
  - name: c
    image: %s
    command: ["true"]
`, class, testimage.Ref)), "apply", "-f", "-")
		return name
	}
	ok := run("rc-ok", a.node+"-ok")
	a.waitPod(ctx, ok, 30*time.Second, "phase Succeeded", phaseIs(corev1.PodSucceeded))

	missing := run("rc-missing", a.node+"-missing")
	a.waitEvent(ctx, "default", "involvedObject.name="+missing, "a FailedCreatePodSandBox event", func(e corev1.Event) bool {
		return e.Reason == "FailedCreatePodSandBox" && strings.Contains(e.Message, `no runtime for "`+a.node+`-handler" is configured`)
	})
	p := a.waitPod(ctx, missing, 10*time.Second, "phase Pending", phaseIs(corev1.PodPending))
	if len(p.Status.ContainerStatuses) > 0 && p.Status.ContainerStatuses[0].State.Running != nil {
		t.Errorf("container of a pod with an unconfigured handler runs: %+v", p.Status.ContainerStatuses)
	}
}
