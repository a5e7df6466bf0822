package pods

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/distribution/reference"
	v1 "k8s.io/api/core/v1"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/client-go/util/flowcontrol"

	"github.com/nodeagent/nodeagent/kubetypes"
	"github.com/nodeagent/nodeagent/pods/keyring"
	"github.com/nodeagent/nodeagent/pods/status"
	"github.com/nodeagent/nodeagent/runtime"
)

// Image pulls as kubelet makes them (pkg/kubelet/images): credentials from
// the pod's image pull secrets, then the node's docker config, then the
// credential provider plugins, tried in turn; a failed pull puts the image of this pod in back-off (10s doubling
// to 5m, kubelet's imageBackOffPeriod and MaxImageBackOff), during which
// the container waits with ImagePullBackOff and the image is not pulled.

const (
	imagePullBackoffInitial = 10 * time.Second
	imagePullBackoffMax     = 300 * time.Second
)

// Event reasons and messages of kubelet's image manager.
const (
	reasonBackOffPull            = "BackOff"
	reasonFailedPullSecret       = "FailedToRetrieveImagePullSecret"
	reasonFailed                 = "Failed"
	reasonPulling, reasonPulled  = "Pulling", "Pulled"
	msgFailedPullSecret          = "Unable to retrieve some image pull secrets (%s); attempting to pull the image may not succeed."
	msgBackOffPull               = "Back-off pulling image %q"
	msgFailedPull, msgPullingFmt = "Failed to pull image %q: %v", "Pulling image %q"
	msgPulledFmt                 = "Successfully pulled image %q in %v (%v including waiting). Image size: %v bytes."
	msgErrorFmt                  = "Error: %s"
	msgPresentFmt                = "Container image %q already present on machine"
)

// NodeKeyring is the node's registry credentials (docker config files,
// then credential provider plugins) for an image's repository;
// *keyring.Node implements it.
type NodeKeyring interface {
	Lookup(repo string) []keyring.Cred
}

// NewNodeKeyring reads the node's credentials from kubelet's places under
// rootDir and the process's home directory (keyring.NodePaths), and asks
// o.CredentialProviders.
func NewNodeKeyring(o Options) *keyring.Node {
	home, _ := os.UserHomeDir()
	n := &keyring.Node{Paths: keyring.NodePaths(o.RootDir, home), Clock: o.Clock, Log: o.Logger.With("component", "keyring")}
	if o.CredentialProviders != nil {
		n.Plugins = o.CredentialProviders
	}
	return n
}

// pullState is a worker's image back-off: per image, the back-off and the
// error of the last pull.
type pullState struct {
	backoff *flowcontrol.Backoff
	lastErr map[string]string
}

// pull pulls c's image with the pod's credentials unless it is in back-off,
// and returns what ensureImage returns.
func (w *worker) pull(ctx context.Context, pod *v1.Pod, c *v1.Container) (string, string, error) {
	ps := &w.pulls
	if ps.backoff == nil {
		ps.backoff = flowcontrol.NewBackOff(imagePullBackoffInitial, imagePullBackoffMax)
		ps.backoff.Clock = w.d.clock
		ps.lastErr = map[string]string{}
	}
	key := c.Image
	if ps.backoff.IsInBackOffSinceUpdate(key, w.d.clock.Now()) {
		msg := fmt.Sprintf(msgBackOffPull, c.Image)
		w.d.event(pod, v1.EventTypeNormal, reasonBackOffPull, msg)
		w.d.event(pod, v1.EventTypeWarning, reasonFailed, fmt.Sprintf(msgErrorFmt, status.ReasonImagePullBackOff))
		if prev, ok := ps.lastErr[key]; ok {
			msg += ": " + prev
		}
		return "", status.ReasonImagePullBackOff, errors.New(msg)
	}
	delete(ps.lastErr, key)
	creds, err := w.pullCredentials(ctx, pod, c.Image)
	if err != nil {
		w.d.event(pod, v1.EventTypeWarning, reasonFailed, fmt.Sprintf(msgFailedPull, c.Image, err))
		return "", status.ReasonErrImagePull, err
	}
	w.d.event(pod, v1.EventTypeNormal, reasonPulling, fmt.Sprintf(msgPullingFmt, c.Image))
	start := w.d.clock.Now()
	img, err := w.pullWith(ctx, c.Image, creds)
	if err != nil {
		w.d.event(pod, v1.EventTypeWarning, reasonFailed, fmt.Sprintf(msgFailedPull, c.Image, err))
		w.d.event(pod, v1.EventTypeWarning, reasonFailed, fmt.Sprintf(msgErrorFmt, status.ReasonErrImagePull))
		ps.backoff.Next(key, w.d.clock.Now())
		ps.lastErr[key] = status.ReasonErrImagePull + ": " + err.Error()
		return "", status.ReasonErrImagePull, err
	}
	d := w.d.clock.Since(start).Truncate(time.Millisecond)
	w.imageIDs[c.Image] = img.ID
	w.d.event(pod, v1.EventTypeNormal, reasonPulled, fmt.Sprintf(msgPulledFmt, c.Image, d, d, img.Size))
	ps.backoff.GC()
	return c.Image, "", nil
}

// pullWith tries each set of credentials in turn (anonymous when there are
// none) and returns the first success, or every failure.
func (w *worker) pullWith(ctx context.Context, image string, creds []keyring.Cred) (runtime.Image, error) {
	if len(creds) == 0 {
		return w.d.rt.PullImageWithAuth(ctx, image, nil)
	}
	var errs []error
	for _, cr := range creds {
		img, err := w.d.rt.PullImageWithAuth(ctx, image, &runtime.RegistryAuth{Username: cr.Username, Password: cr.Password})
		if err == nil {
			return img, nil
		}
		w.log.Info("pull with credentials failed", "image", image, "credentials", cr.Source, "err", err)
		errs = append(errs, err)
	}
	return runtime.Image{}, utilerrors.NewAggregate(errs)
}

// pullCredentials returns the credentials for image: the pod's pull
// secrets' first, then the node's. A pull secret that cannot be read is
// skipped with kubelet's warning event (the pull may still succeed); one
// that cannot be parsed fails the pull with an error naming it.
func (w *worker) pullCredentials(ctx context.Context, pod *v1.Pod, image string) ([]keyring.Cred, error) {
	named, err := reference.ParseDockerRef(image)
	if err != nil {
		return nil, fmt.Errorf("image reference %q: %w", image, err)
	}
	repo := named.Name()
	var ring keyring.Keyring
	static := kubetypes.IsStaticPod(pod) || w.source == kubetypes.SourceFile
	var failed []string
	for _, ref := range pod.Spec.ImagePullSecrets {
		if ref.Name == "" {
			continue
		}
		if static || w.d.secrets == nil {
			failed = append(failed, ref.Name)
			continue
		}
		s, err := w.d.secrets.Get(ctx, w.uid, pod.Namespace, ref.Name)
		if err != nil {
			w.log.Info("Unable to retrieve pull secret, the image pull may not succeed.", "secret", pod.Namespace+"/"+ref.Name, "err", err)
			failed = append(failed, ref.Name)
			continue
		}
		cfg, err := keyring.FromSecret(s)
		if err != nil {
			return nil, fmt.Errorf("image pull secret %s/%s: %s: %w", pod.Namespace, ref.Name, secretKey(s), err)
		}
		ring.Add("secret "+pod.Namespace+"/"+ref.Name, cfg)
	}
	if len(failed) > 0 {
		w.d.event(pod, v1.EventTypeWarning, reasonFailedPullSecret, fmt.Sprintf(msgFailedPullSecret, strings.Join(failed, ", ")))
	}
	creds := ring.Lookup(repo)
	if w.d.nodeKeyring != nil {
		creds = append(creds, w.d.nodeKeyring.Lookup(repo)...)
	}
	return creds, nil
}

func secretKey(s *v1.Secret) string {
	if s.Type == v1.SecretTypeDockercfg {
		return "data[" + v1.DockerConfigKey + "]"
	}
	return "data[" + v1.DockerConfigJsonKey + "]"
}
