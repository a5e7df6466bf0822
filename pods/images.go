package pods

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"log/slog"

	"github.com/distribution/reference"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/utils/clock"

	"github.com/nodeagent/nodeagent/kubetypes"
	"github.com/nodeagent/nodeagent/pleg"
	"github.com/nodeagent/nodeagent/pods/keyring"
	"github.com/nodeagent/nodeagent/pods/pullmanager"
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
	msgPresentAccessibleFmt      = "Container image %q already present on machine and can be accessed by the pod"
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

// podImages is a pod's images: it makes each container's image present
// as its pull policy says (pulling with the pod's and the node's
// credentials, under kubelet's per-image back-off) and keeps the image IDs
// the pod's status reports. It belongs to the pod's worker and is used
// from its goroutine.
type podImages struct {
	uid    types.UID
	source string // the pod's source: a static pod reads no pull secrets
	rt     Runtime
	clock  clock.Clock
	event  eventFunc
	log    *slog.Logger
	// secrets reads the pod's image pull secrets (nil: no API server);
	// node is the node's registry credentials (nil: none).
	secrets ObjectGetter[*v1.Secret]
	node    NodeKeyring
	// pulls is KubeletEnsureSecretPulledImages (nil: the gate is off and
	// an image on the node is served to any pod).
	pulls *pullmanager.Manager
	// puller is the node's pulls (serialized, bounded, rate-limited).
	puller *imagePuller

	ids     map[string]string    // image ID by image reference, for the status
	backoff *flowcontrol.Backoff // per image, since its last failed pull
	lastErr map[string]string    // per image, the error of its last pull
	// volumes are the pod's image volumes mounted on the host, by
	// volume name (imagevolumes.go).
	volumes map[string]bool
}

func newPodImages(d *workerDeps, uid types.UID, source string, log *slog.Logger) podImages {
	puller := d.puller
	if puller == nil {
		puller = newImagePuller(ImagePullLimits{}, d.clock)
	}
	return podImages{uid: uid, source: source, rt: d.rt, clock: d.clock, event: d.event, log: log,
		secrets: d.secrets, node: d.nodeKeyring, pulls: d.pulls, puller: puller, ids: map[string]string{}}
}

// ensure applies the image pull policy and returns the reference to
// create the container from, or the waiting reason and the error.
func (im *podImages) ensure(ctx context.Context, pod *v1.Pod, c *v1.Container) (string, string, error) {
	policy := c.ImagePullPolicy
	if policy != v1.PullAlways {
		img, err := im.rt.GetImage(ctx, c.Image)
		// The latency trace: containerd's image lookup apart from the
		// rest of the "image" step (the pull-record check, events, a pull).
		stepTraceFrom(ctx).step("imageLookup")
		if err != nil && !errors.Is(err, runtime.ErrNotFound) {
			return "", status.ReasonErrImagePull, err
		}
		present := err == nil
		switch {
		case present && im.pulls == nil:
			im.ids[c.Image] = img.ID
			im.event(pod, v1.EventTypeNormal, reasonPulled, fmt.Sprintf(msgPresentFmt, c.Image))
			return c.Image, "", nil
		case present:
			ok, err := im.accessible(ctx, pod, c.Image, img.ID)
			if err != nil {
				im.event(pod, v1.EventTypeWarning, reasonFailed, fmt.Sprintf(msgFailedPull, c.Image, err))
				return "", status.ReasonErrImagePull, err
			}
			if ok {
				im.ids[c.Image] = img.ID
				im.event(pod, v1.EventTypeNormal, reasonPulled, fmt.Sprintf(msgPresentAccessibleFmt, c.Image))
				return c.Image, "", nil
			}
			// Present, but not for this pod's credentials: as if absent
			// (kubelet does not reveal the image), so pulled again with them.
		}
		if policy == v1.PullNever {
			msg := fmt.Sprintf("Container image %q is not present with pull policy of Never", c.Image)
			im.event(pod, v1.EventTypeWarning, status.ReasonErrImageNeverPull, msg)
			return "", status.ReasonErrImageNeverPull, errors.New(msg)
		}
	}
	return im.pull(ctx, pod, c)
}

// accessible reports whether the image on the node (ID imageRef) may be
// given to pod without a pull: KubeletEnsureSecretPulledImages's check of
// the pod's pull secrets against those it was pulled with.
func (im *podImages) accessible(ctx context.Context, pod *v1.Pod, image, imageRef string) (bool, error) {
	creds, err := im.credentials(ctx, pod, image)
	if err != nil {
		return false, err
	}
	var secrets []pullmanager.Secret
	for _, cr := range creds {
		if cr.Secret != nil {
			secrets = append(secrets, pullmanager.Secret{UID: cr.Secret.UID, Namespace: cr.Secret.Namespace, Name: cr.Secret.Name,
				CredentialHash: pullmanager.CredentialHash(cr.Username, cr.Password)})
		}
	}
	return !im.pulls.MustPull(image, imageRef, secrets), nil
}

// pulledWith is what a pull used, for the records: a pod's secret, or
// credentials every pod has (the node's, or none).
func pulledWith(cr *keyring.Cred) pullmanager.Credentials {
	if cr == nil || cr.Secret == nil {
		return pullmanager.Credentials{NodePodsAccessible: true}
	}
	return pullmanager.Credentials{KubernetesSecrets: []pullmanager.Secret{{UID: cr.Secret.UID, Namespace: cr.Secret.Namespace,
		Name: cr.Secret.Name, CredentialHash: pullmanager.CredentialHash(cr.Username, cr.Password)}}}
}

// learnIDs looks up the IDs of the images of rs's containers it does not
// know yet (containers an earlier agent started), for the status.
func (im *podImages) learnIDs(ctx context.Context, rs pleg.PodStatus) {
	for _, c := range rs.Containers {
		if _, ok := im.ids[c.Image]; !ok && c.Image != "" {
			if img, err := im.rt.GetImage(ctx, c.Image); err == nil {
				im.ids[c.Image] = img.ID
			}
		}
	}
}

// pull pulls c's image with the pod's credentials unless it is in back-off,
// and returns what ensure returns.
func (im *podImages) pull(ctx context.Context, pod *v1.Pod, c *v1.Container) (string, string, error) {
	if im.backoff == nil {
		im.backoff = flowcontrol.NewBackOff(imagePullBackoffInitial, imagePullBackoffMax)
		im.backoff.Clock = im.clock
		im.lastErr = map[string]string{}
	}
	key := c.Image
	if im.backoff.IsInBackOffSinceUpdate(key, im.clock.Now()) {
		msg := fmt.Sprintf(msgBackOffPull, c.Image)
		im.event(pod, v1.EventTypeNormal, reasonBackOffPull, msg)
		im.event(pod, v1.EventTypeWarning, reasonFailed, fmt.Sprintf(msgErrorFmt, status.ReasonImagePullBackOff))
		if prev, ok := im.lastErr[key]; ok {
			msg += ": " + prev
		}
		return "", status.ReasonImagePullBackOff, errors.New(msg)
	}
	delete(im.lastErr, key)
	creds, err := im.credentials(ctx, pod, c.Image)
	if err != nil {
		im.event(pod, v1.EventTypeWarning, reasonFailed, fmt.Sprintf(msgFailedPull, c.Image, err))
		return "", status.ReasonErrImagePull, err
	}
	if im.pulls != nil {
		if err := im.pulls.RecordIntent(c.Image); err != nil {
			return "", status.ReasonErrImagePull, fmt.Errorf("Failed to record image pull intent for container image %q: %w", c.Image, err)
		}
	}
	// As in kubelet, the Pulling event is sent before the pull waits for
	// its turn (serializeImagePulls, maxParallelImagePulls), and the
	// Pulled event gives both the pull's own time and the time since.
	start := im.clock.Now()
	im.event(pod, v1.EventTypeNormal, reasonPulling, fmt.Sprintf(msgPullingFmt, c.Image))
	var img runtime.Image
	var used *keyring.Cred
	pulling, err := im.puller.do(ctx, func(ctx context.Context) (err error) {
		img, used, err = im.pullWith(ctx, c.Image, creds)
		return err
	})
	if im.pulls != nil {
		if err != nil {
			im.pulls.RecordFailed(c.Image)
		} else if rerr := im.pulls.RecordPulled(c.Image, img.ID, pulledWith(used)); rerr != nil {
			im.log.Error("failed to write image pulled record", "image", c.Image, "imageRef", img.ID, "err", rerr)
		}
	}
	if err != nil {
		im.event(pod, v1.EventTypeWarning, reasonFailed, fmt.Sprintf(msgFailedPull, c.Image, err))
		im.event(pod, v1.EventTypeWarning, reasonFailed, fmt.Sprintf(msgErrorFmt, status.ReasonErrImagePull))
		im.backoff.Next(key, im.clock.Now())
		im.lastErr[key] = status.ReasonErrImagePull + ": " + err.Error()
		return "", status.ReasonErrImagePull, err
	}
	d := im.clock.Since(start).Truncate(time.Millisecond)
	im.ids[c.Image] = img.ID
	im.event(pod, v1.EventTypeNormal, reasonPulled, fmt.Sprintf(msgPulledFmt, c.Image, pulling.Truncate(time.Millisecond), d, img.Size))
	im.backoff.GC()
	return c.Image, "", nil
}

// pullWith tries each set of credentials in turn (anonymous when there are
// none) and returns the first success, or every failure.
// The credentials that succeeded are returned (nil: anonymous).
func (im *podImages) pullWith(ctx context.Context, image string, creds []keyring.Cred) (runtime.Image, *keyring.Cred, error) {
	if len(creds) == 0 {
		img, err := im.rt.PullImageWithAuth(ctx, image, nil)
		return img, nil, err
	}
	var errs []error
	for i, cr := range creds {
		img, err := im.rt.PullImageWithAuth(ctx, image, &runtime.RegistryAuth{Username: cr.Username, Password: cr.Password})
		if err == nil {
			return img, &creds[i], nil
		}
		im.log.Info("pull with credentials failed", "image", image, "credentials", cr.Source, "err", err)
		errs = append(errs, err)
	}
	return runtime.Image{}, nil, utilerrors.NewAggregate(errs)
}

// credentials returns the credentials for image: the pod's pull
// secrets' first, then the node's. A pull secret that cannot be read is
// skipped with kubelet's warning event (the pull may still succeed); one
// that cannot be parsed fails the pull with an error naming it.
func (im *podImages) credentials(ctx context.Context, pod *v1.Pod, image string) ([]keyring.Cred, error) {
	named, err := reference.ParseDockerRef(image)
	if err != nil {
		return nil, fmt.Errorf("image reference %q: %w", image, err)
	}
	repo := named.Name()
	var ring keyring.Keyring
	static := kubetypes.IsStaticPod(pod) || im.source == kubetypes.SourceFile
	var failed []string
	for _, ref := range pod.Spec.ImagePullSecrets {
		if ref.Name == "" {
			continue
		}
		if static || im.secrets == nil {
			failed = append(failed, ref.Name)
			continue
		}
		s, err := im.secrets.Get(ctx, im.uid, pod.Namespace, ref.Name)
		if err != nil {
			im.log.Info("Unable to retrieve pull secret, the image pull may not succeed.", "secret", pod.Namespace+"/"+ref.Name, "err", err)
			failed = append(failed, ref.Name)
			continue
		}
		cfg, err := keyring.FromSecret(s)
		if err != nil {
			return nil, fmt.Errorf("image pull secret %s/%s: %s: %w", pod.Namespace, ref.Name, secretKey(s), err)
		}
		ring.AddSecret("secret "+pod.Namespace+"/"+ref.Name, keyring.SecretRef{UID: string(s.UID), Namespace: s.Namespace, Name: s.Name}, cfg)
	}
	if len(failed) > 0 {
		im.event(pod, v1.EventTypeWarning, reasonFailedPullSecret, fmt.Sprintf(msgFailedPullSecret, strings.Join(failed, ", ")))
	}
	creds := ring.Lookup(repo)
	if im.node != nil {
		creds = append(creds, im.node.Lookup(repo)...)
	}
	return creds, nil
}

func secretKey(s *v1.Secret) string {
	if s.Type == v1.SecretTypeDockercfg {
		return "data[" + v1.DockerConfigKey + "]"
	}
	return "data[" + v1.DockerConfigJsonKey + "]"
}
