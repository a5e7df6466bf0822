package e2e

import (
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodeagent/nodeagent/internal/testing/testimage"
)

// dockerConfigJSON is a config.json granting user:pass on registry.
func dockerConfigJSON(registry, user, pass string) []byte {
	auth := base64.StdEncoding.EncodeToString([]byte(user + ":" + pass))
	return []byte(fmt.Sprintf(`{"auths":{%q:{"auth":%q}}}`, registry, auth))
}

func waitingIs(reason, contains string) func(*corev1.Pod) bool {
	return func(p *corev1.Pod) bool {
		if len(p.Status.ContainerStatuses) == 0 {
			return false
		}
		w := p.Status.ContainerStatuses[0].State.Waiting
		return w != nil && w.Reason == reason && strings.Contains(w.Message, contains)
	}
}

// Private registries (on loopback, with basic auth, refusing anonymous
// pulls): a pod's imagePullSecrets and the node's config.json in the root
// dir let pulls through; a pod without credentials gets ErrImagePull with
// the registry's 401, then ImagePullBackOff; a pod whose secret is created
// later runs after its next back-off retry.
func TestImagePullSecrets(t *testing.T) {
	t.Parallel()
	reg, err := testimage.NewRegistry(map[string]string{"e2e": "pod-secret"})
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	nodeReg, err := testimage.NewRegistry(map[string]string{"node": "node-secret"})
	if err != nil {
		t.Fatal(err)
	}
	defer nodeReg.Close()

	a, _ := podAgent(t, "")
	if err := os.MkdirAll(a.rootDir(), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(a.rootDir(), "config.json"), dockerConfigJSON(nodeReg.Host, "node", "node-secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	a.start()
	ctx := context.Background()
	a.waitReady(ctx, 30*time.Second)

	secrets := a.env.Admin.CoreV1().Secrets("default")
	secret := func(name string) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name}, Type: corev1.SecretTypeDockerConfigJson,
			Data: map[string][]byte{corev1.DockerConfigJsonKey: dockerConfigJSON(reg.Host, "e2e", "pod-secret")}}
	}
	cred := a.node + "-regcred"
	if _, err := secrets.Create(ctx, secret(cred), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = secrets.Delete(context.Background(), cred, metav1.DeleteOptions{}) })
	late := a.node + "-late"
	t.Cleanup(func() { _ = secrets.Delete(context.Background(), late, metav1.DeleteOptions{}) })

	image := reg.Host + "/private/busybox:v1"
	pod := func(name, image, secret string) string {
		body := fmt.Sprintf(`  containers:
  - name: app
    image: %s
    imagePullPolicy: Always
    command: ["sleep", "3600"]
`, image)
		if secret != "" {
			body += "  imagePullSecrets:\n  - name: " + secret + "\n"
		}
		return podYAML(a.node+"-"+name, a.node, body)
	}
	kubectl(t, a.env, pod("with-secret", image, cred), "apply", "-f", "-")
	kubectl(t, a.env, pod("no-secret", image, ""), "apply", "-f", "-")
	kubectl(t, a.env, pod("late-secret", image, late), "apply", "-f", "-")
	kubectl(t, a.env, pod("node-creds", nodeReg.Host+"/node/busybox:v1", ""), "apply", "-f", "-")

	a.waitPod(ctx, a.node+"-with-secret", 60*time.Second, "running with its pull secret", running)
	a.waitPod(ctx, a.node+"-node-creds", 60*time.Second, "running with the node's credentials", running)

	// No credentials: the registry's 401, then kubelet's back-off.
	noSecret := a.node + "-no-secret"
	// ErrImagePull lasts until the next sync (about a second): polling
	// may see ImagePullBackOff first; the event says ErrImagePull.
	p := a.waitPod(ctx, noSecret, 30*time.Second, "ErrImagePull or ImagePullBackOff with the 401", func(p *corev1.Pod) bool {
		return waitingIs("ErrImagePull", "401 Unauthorized")(p) || waitingIs("ImagePullBackOff", "401 Unauthorized")(p)
	})
	t.Logf("waiting: %s", p.Status.ContainerStatuses[0].State.Waiting.Message)
	a.waitEvent(ctx, "default", "involvedObject.name="+noSecret, "Error: ErrImagePull", func(e corev1.Event) bool {
		return e.Reason == "Failed" && e.Message == "Error: ErrImagePull"
	})
	p = a.waitPod(ctx, noSecret, 30*time.Second, "ImagePullBackOff", waitingIs("ImagePullBackOff", `Back-off pulling image "`+image+`": ErrImagePull: `))
	if msg := p.Status.ContainerStatuses[0].State.Waiting.Message; !strings.Contains(msg, "401") {
		t.Errorf("ImagePullBackOff message %q lacks the 401", msg)
	}
	a.waitEvent(ctx, "default", "involvedObject.name="+noSecret, "Failed to pull image ... 401", func(e corev1.Event) bool {
		return e.Reason == "Failed" && strings.HasPrefix(e.Message, fmt.Sprintf("Failed to pull image %q: ", image)) && strings.Contains(e.Message, "401")
	})
	a.waitEvent(ctx, "default", "involvedObject.name="+noSecret, "Back-off pulling image", func(e corev1.Event) bool {
		return e.Reason == "BackOff" && e.Message == fmt.Sprintf("Back-off pulling image %q", image)
	})

	// The missing secret: kubelet's warning, the pull without it fails;
	// once the secret exists the next retry pulls with it.
	lateName := a.node + "-late-secret"
	a.waitEvent(ctx, "default", "involvedObject.name="+lateName, "FailedToRetrieveImagePullSecret", func(e corev1.Event) bool {
		return e.Reason == "FailedToRetrieveImagePullSecret" && strings.Contains(e.Message, "("+late+")")
	})
	a.waitPod(ctx, lateName, 30*time.Second, "ImagePullBackOff without its secret", waitingIs("ImagePullBackOff", "401"))
	created := time.Now()
	if _, err := secrets.Create(ctx, secret(late), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	a.waitPod(ctx, lateName, 90*time.Second, "running once its secret exists", running)
	t.Logf("the pod with the late secret ran %v after the secret was created", time.Since(created).Round(time.Millisecond))

	if got, _ := a.env.Admin.CoreV1().Pods("default").Get(ctx, noSecret, metav1.GetOptions{}); got != nil && running(got) {
		t.Error("the pod without credentials runs")
	}
	if reg.Unauthorized() == 0 || nodeReg.Manifests() == 0 {
		t.Errorf("registry: %d refused, node registry: %d manifests", reg.Unauthorized(), nodeReg.Manifests())
	}
}

// Images as operators configure them, through the agent as a pod pulls
// them: a pod whose image names a registry nothing listens on runs
// because the agent's registryConfigPath (hosts.toml only) sends the pull
// to a loopback mirror; a pod whose image is on a basic-auth registry runs
// with credentials that only a credential provider plugin (a real
// executable, configured with imageCredentialProviderConfig and
// imageCredentialProviderBinDir) gives. Both images have names the
// agent's namespace does not hold (podAgent imports the test image under
// its own name), and imagePullPolicy Always makes each pod pull.
func TestPullsThroughHostsTomlMirrorAndCredentialPlugin(t *testing.T) {
	t.Parallel()
	mirror, err := testimage.NewRegistry(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer mirror.Close()
	reg, err := testimage.NewRegistry(map[string]string{"robot": "from-plugin"})
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()

	// hosts.toml for the unreachable registry: the mirror, then itself.
	upstream := fmt.Sprintf("127.0.0.1:%d", freePort(t)) // nothing listens
	hostsRoot := t.TempDir()
	hostDir := filepath.Join(hostsRoot, strings.Replace(upstream, ":", "_", 1)+"_")
	if err := os.MkdirAll(hostDir, 0o755); err != nil {
		t.Fatal(err)
	}
	hosts := fmt.Sprintf("server = \"http://%s\"\n\n[host.\"http://%s\"]\n  capabilities = [\"pull\", \"resolve\"]\n", upstream, mirror.Host)
	if err := os.WriteFile(filepath.Join(hostDir, "hosts.toml"), []byte(hosts), 0o644); err != nil {
		t.Fatal(err)
	}

	// The test plugin, built as the credprovider integration test builds it.
	binDir := t.TempDir()
	build := exec.Command("go", "build", "-o", filepath.Join(binDir, "test-credential-provider"), "../pods/keyring/credprovider/testdata/testplugin")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the test plugin: %v\n%s", err, out)
	}
	pluginLog := filepath.Join(t.TempDir(), "requests.log")
	providerConfig := filepath.Join(t.TempDir(), "credential-provider-config.yaml")
	if err := os.WriteFile(providerConfig, []byte(fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1
kind: CredentialProviderConfig
providers:
- name: test-credential-provider
  matchImages: [%q]
  defaultCacheDuration: 10m
  apiVersion: credentialprovider.kubelet.k8s.io/v1
  env:
  - {name: TEST_PLUGIN_USER, value: robot}
  - {name: TEST_PLUGIN_PASSWORD, value: from-plugin}
  - {name: TEST_PLUGIN_LOG, value: %q}
`, reg.Host, pluginLog)), 0o644); err != nil {
		t.Fatal(err)
	}

	a, _ := readyPodAgent(t, fmt.Sprintf("registryConfigPath: %s\nimageCredentialProviderConfig: %s\nimageCredentialProviderBinDir: %s\n",
		hostsRoot, providerConfig, binDir))
	ctx := context.Background()
	pod := func(name, image string) string {
		return podYAML(a.node+"-"+name, a.node, fmt.Sprintf(`  containers:
  - name: app
    image: %s
    imagePullPolicy: Always
    command: ["sleep", "3600"]
`, image))
	}
	mirrored := upstream + "/mirrored/busybox:v1"
	private := reg.Host + "/plugin/busybox:v1"
	kubectl(t, a.env, pod("mirrored", mirrored), "apply", "-f", "-")
	kubectl(t, a.env, pod("plugin-creds", private), "apply", "-f", "-")

	p := a.waitPod(ctx, a.node+"-mirrored", 90*time.Second, "running through the hosts.toml mirror", running)
	// The manifest is what the pull asks the mirror for: the layers are
	// already in containerd's content store (shared between namespaces),
	// so no blob need be fetched.
	if mirror.Manifests() == 0 {
		t.Error("the mirror served no manifest")
	}
	if got := p.Status.ContainerStatuses[0].Image; got != mirrored {
		t.Errorf("status image %q, want %q", got, mirrored)
	}

	a.waitPod(ctx, a.node+"-plugin-creds", 90*time.Second, "running with the plugin's credentials", running)
	// Only the plugin knows robot's password: a manifest served means the
	// registry accepted its credentials.
	if reg.Manifests() == 0 {
		t.Error("the auth registry served no manifest")
	}
	log, err := os.ReadFile(pluginLog)
	if err != nil {
		t.Fatalf("the plugin was not run: %v", err)
	}
	if !strings.Contains(string(log), reg.Host+"/plugin/busybox") || strings.Contains(string(log), upstream) {
		t.Errorf("plugin requests:\n%s\nwant %s only", log, private)
	}
	t.Logf("mirror: %d manifests; auth registry: %d manifests, %d refused; plugin requests: %q",
		mirror.Manifests(), reg.Manifests(), reg.Unauthorized(), strings.TrimSpace(string(log)))
}
