package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	podresourcesapi "k8s.io/kubelet/pkg/apis/podresources/v1"

	"github.com/nodeagent/nodeagent/cm/devicemanager/checkpoint"
	"github.com/nodeagent/nodeagent/internal/testing/testenv"
	"github.com/nodeagent/nodeagent/internal/testing/testimage"
	"github.com/nodeagent/nodeagent/runtime"
)

// The sample device plugin's image, as upstream names it
// (test/images/sample-device-plugin: VERSION 1.8), built here from the
// binary hack/build-sample-device-plugin.sh makes from the pinned
// k8s.io/kubernetes module, laid out as its Dockerfile.
const sampleDevicePluginRef = "registry.k8s.io/e2e-test-images/sample-device-plugin:1.8"

// The sample device plugin's resource: two healthy devices, Dev-1 and
// Dev-2; Allocate mounts /tmp/<ID> from the host at the same path.
const sampleResource = "example.com/resource"

// Device plugins as an operator meets them, with upstream's sample device
// plugin run as a pod the way upstream's manifest runs it (a hostPath of
// the agent's device-plugins directory at /var/lib/kubelet/device-plugins):
// it registers and the Node shows its two devices; a pod requesting one
// gets its mount; a pod asking for more than is left is refused as kubelet
// refuses it (UnexpectedAdmissionError); the pod-resources API lists the
// assignment; after a SIGKILL and restart of the agent the running pod
// keeps its device (the checkpoint) and the re-registered plugin's other
// device goes to the next pod, never the held one; the plugin's removal
// zeroes allocatable while capacity stays.
func TestDevicePlugins(t *testing.T) {
	t.Parallel()
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	bin, err := os.ReadFile(filepath.Join(root, "_output", "bin", "sample-device-plugin"))
	if err != nil {
		t.Fatalf("the sample device plugin is built by hack/build-sample-device-plugin.sh (make sample-device-plugin): %v", err)
	}
	a, rt := readyPodAgent(t, "nodeStatusUpdateFrequency: 1s\n")
	ctx := context.Background()
	importSampleDevicePlugin(t, rt, bin)
	for _, id := range []string{"Dev-1", "Dev-2"} {
		p := filepath.Join("/tmp", id)
		if _, err := os.Stat(p); os.IsNotExist(err) {
			// The agent makes a missing mount source, as containerd's CRI
			// plugin does; the test removes what it made.
			t.Cleanup(func() { os.Remove(p) })
		}
	}

	pluginDir := filepath.Join(a.rootDir(), "device-plugins")
	plugin := a.node + "-sdp"
	kubectl(t, a.env, podYAML(plugin, a.node, fmt.Sprintf(`  terminationGracePeriodSeconds: 5
  volumes:
  - name: device-plugin
    hostPath: {path: %[2]s}
  containers:
  - name: plugin
    image: %[1]s
    env: [{name: PLUGIN_SOCK_DIR, value: /var/lib/kubelet/device-plugins}]
    volumeMounts: [{name: device-plugin, mountPath: /var/lib/kubelet/device-plugins}]
`, sampleDevicePluginRef, pluginDir)), "apply", "-f", "-")
	a.waitPod(ctx, plugin, 60*time.Second, "Running", running)
	a.waitNode(ctx, 60*time.Second, sampleResource+" capacity and allocatable 2", devicesAre("2", "2"))

	consumer := func(name, n string) string {
		return podYAML(name, a.node, fmt.Sprintf(`  terminationGracePeriodSeconds: 1
  containers:
  - name: c
    image: %s
    command: ["sh", "-c", "ls -d /tmp/Dev-*; sleep 3600"]
    resources: {limits: {%s: "%s"}}
`, testimage.Ref, sampleResource, n))
	}
	first := a.node + "-dev-a"
	kubectl(t, a.env, consumer(first, "1"), "apply", "-f", "-")
	fp := a.waitPod(ctx, first, 60*time.Second, "Running", running)
	held := podDevices(t, a, first)
	if len(held) != 1 {
		t.Fatalf("pod-resources List: pod %s has devices %v, want one", first, held)
	}
	// Its mount, and only its.
	log := a.waitLog(fp, "c", 0, "/tmp/"+held[0])
	if strings.Count(log, "/tmp/Dev-") != 1 {
		t.Errorf("pod %s sees %q, want only /tmp/%s", first, log, held[0])
	}

	// Beyond what is left: refused as kubelet refuses it.
	tooMany := a.node + "-dev-b"
	kubectl(t, a.env, consumer(tooMany, "2"), "apply", "-f", "-")
	bp := a.waitPod(ctx, tooMany, 30*time.Second, "Failed", phaseIs(corev1.PodFailed))
	const msg = "Pod was rejected: Allocate failed due to requested number of devices unavailable for example.com/resource. Requested: 2, Available: 1, which is unexpected"
	if bp.Status.Reason != "UnexpectedAdmissionError" || bp.Status.Message != msg {
		t.Errorf("pod %s: reason %q message %q, want UnexpectedAdmissionError %q", tooMany, bp.Status.Reason, bp.Status.Message, msg)
	}

	// The pod-resources API's allocatable devices.
	if got := allocatableDevices(t, a); !slices.Equal(got, []string{"Dev-1", "Dev-2"}) {
		t.Errorf("GetAllocatableResources: %v, want Dev-1 and Dev-2", got)
	}

	// SIGKILL and restart: the checkpoint keeps the running pod's device.
	if _, _, err := checkpoint.Read(pluginDir); err != nil {
		t.Errorf("checkpoint: %v", err)
	}
	a.stop(syscall.SIGKILL)
	a.start()
	a.waitReady(ctx, 60*time.Second)
	if got := podDevices(t, a, first); !slices.Equal(got, held) {
		t.Errorf("after the restart pod %s has devices %v, want %v", first, got, held)
	}
	// The plugin sees kubelet.sock made again and registers again (its
	// stub retries every 10 s): the agent's own view first, then the Node.
	for i := 0; !slices.Equal(allocatableDevices(t, a), []string{"Dev-1", "Dev-2"}); i++ {
		if i == 900 {
			t.Fatal("the sample device plugin did not register again within 90s of the restart")
		}
		time.Sleep(100 * time.Millisecond)
	}
	a.waitNode(ctx, 30*time.Second, sampleResource+" back after the restart", devicesAre("2", "2"))
	second := a.node + "-dev-c"
	kubectl(t, a.env, consumer(second, "1"), "apply", "-f", "-")
	sp := a.waitPod(ctx, second, 60*time.Second, "Running", running)
	got := podDevices(t, a, second)
	if len(got) != 1 || got[0] == held[0] {
		t.Errorf("pod %s got %v while pod %s holds %v", second, got, first, held)
	}
	if len(got) == 1 {
		a.waitLog(sp, "c", 0, "/tmp/"+got[0])
	}
	third := a.node + "-dev-d"
	kubectl(t, a.env, consumer(third, "1"), "apply", "-f", "-")
	tp := a.waitPod(ctx, third, 30*time.Second, "Failed", phaseIs(corev1.PodFailed))
	if tp.Status.Reason != "UnexpectedAdmissionError" {
		t.Errorf("pod %s with both devices held: reason %q message %q, want UnexpectedAdmissionError", third, tp.Status.Reason, tp.Status.Message)
	}
	fp = a.waitPod(ctx, first, 5*time.Second, "still Running", running)
	if rc := fp.Status.ContainerStatuses[0].RestartCount; rc != 0 {
		t.Errorf("pod %s restarted %d times", first, rc)
	}

	// The plugin goes: allocatable 0, capacity kept (kubelet's grace).
	if err := a.env.Admin.CoreV1().Pods("default").Delete(ctx, plugin, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	a.waitNode(ctx, 60*time.Second, sampleResource+" allocatable 0, capacity 2", devicesAre("2", "0"))

	for _, name := range []string{first, tooMany, second, third} {
		if err := a.env.Admin.CoreV1().Pods("default").Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	podsGone(t, a, plugin, first, tooMany, second, third)
}

// devicesAre says whether the Node reports the sample resource with this
// capacity and allocatable.
func devicesAre(capacity, allocatable string) func(*corev1.Node) bool {
	return func(n *corev1.Node) bool {
		c, okc := n.Status.Capacity[sampleResource]
		al, oka := n.Status.Allocatable[sampleResource]
		return okc && oka && c.String() == capacity && al.String() == allocatable
	}
}

// importSampleDevicePlugin imports the plugin's image into the agent's
// containerd namespace.
func importSampleDevicePlugin(t *testing.T, rt *runtime.Runtime, bin []byte) {
	t.Helper()
	a, err := testimage.Spec{
		Ref: sampleDevicePluginRef,
		Files: []testimage.File{
			testimage.Dir("tmp", 0o1777),
			testimage.Dir("var/lib/kubelet/device-plugins", 0o755),
			testimage.Reg("sampledeviceplugin", 0o755, bin),
		},
		Entrypoint: []string{"/sampledeviceplugin", "-alsologtostderr"},
	}.Archive()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := rt.ImportImage(ctx, bytes.NewReader(a)); err != nil {
		t.Fatal(err)
	}
}

// allocatableDevices are the sample resource's devices in the
// pod-resources API's GetAllocatableResources.
func allocatableDevices(t *testing.T, a *agent) []string {
	t.Helper()
	ids, _ := podResources(t, a, func(c podresourcesapi.PodResourcesListerClient, ctx context.Context) ([]string, bool) {
		r, err := c.GetAllocatableResources(ctx, &podresourcesapi.AllocatableResourcesRequest{}, grpc.WaitForReady(true))
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, d := range r.Devices {
			if d.ResourceName == sampleResource {
				ids = append(ids, d.DeviceIds...)
			}
		}
		slices.Sort(ids)
		return ids, true
	})
	return ids
}

// podResources calls the agent's pod-resources API.
func podResources[T, U any](t *testing.T, a *agent, call func(podresourcesapi.PodResourcesListerClient, context.Context) (T, U)) (T, U) {
	t.Helper()
	sock := filepath.Join(a.rootDir(), "pod-resources", "kubelet.sock")
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return call(podresourcesapi.NewPodResourcesListerClient(conn), ctx)
}

// podDevices are the sample resource's devices of a pod's container "c",
// from the pod-resources API's List, once the pod is listed (after a
// restart the socket and the re-admitted pods come back within 30 s).
func podDevices(t *testing.T, a *agent, pod string) []string {
	t.Helper()
	for i := 0; ; i++ {
		ids, listed := podResources(t, a, func(c podresourcesapi.PodResourcesListerClient, ctx context.Context) ([]string, bool) {
			r, err := c.List(ctx, &podresourcesapi.ListPodResourcesRequest{}, grpc.WaitForReady(true))
			if err != nil {
				t.Fatal(err)
			}
			var ids []string
			listed := false
			for _, p := range r.PodResources {
				if p.Name != pod || p.Namespace != "default" {
					continue
				}
				listed = true
				for _, c := range p.Containers {
					for _, d := range c.Devices {
						if c.Name == "c" && d.ResourceName == sampleResource {
							ids = append(ids, d.DeviceIds...)
						}
					}
				}
			}
			slices.Sort(ids)
			return ids, listed
		})
		if listed {
			return ids
		}
		if i == 300 {
			t.Fatalf("pod-resources List: pod %s not listed within 30s", pod)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
