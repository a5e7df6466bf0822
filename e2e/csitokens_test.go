package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/nodeagent/nodeagent/internal/testing/csihostpath"
	"github.com/nodeagent/nodeagent/internal/testing/testimage"
)

// CSIDriver tokenRequests and requiresRepublish against the real API
// server (its Node authorizer and NodeRestriction admission, which lets a
// node request a token for an audience only when the pod's volumes name
// it): a driver without tokenRequests gets no
// csi.storage.k8s.io/serviceAccount.tokens; once its CSIDriver has a
// tokenRequest for audience "vault" and requiresRepublish, a pod's inline
// volume is published with a token that the API server's TokenReview
// accepts for "vault" only, as the pod's service account, bound to that
// pod, expiring in the API server's default hour; the volume is published
// again at the pod's syncs (after its start, and at the resync), with the
// cached token; the pods' teardown unpublishes as usual.
func TestCSIServiceAccountTokens(t *testing.T) {
	t.Parallel()
	a, rt := readyPodAgent(t, "")
	ctx := context.Background()
	admin := a.env.Admin
	cp := deployCSIPlugin(t, a, rt, false, "-record-publish=/csi-data-dir/publish.jsonl")
	records := filepath.Join(cp.data, "publish.jsonl")

	// publishes returns the NodePublishVolume calls for the pod's volume.
	publishes := func(uid types.UID) []csihostpath.PublishRecord {
		t.Helper()
		b, err := os.ReadFile(records)
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		// Only whole lines: the driver may be appending one as the
		// file is read (a torn last line is the next read's).
		b = b[:bytes.LastIndexByte(b, '\n')+1]
		target := filepath.Join(cp.root, "pods", string(uid), "volumes/kubernetes.io~csi/secrets/mount")
		var out []csihostpath.PublishRecord
		sc := bufio.NewScanner(bytes.NewReader(b))
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var r csihostpath.PublishRecord
			if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
				t.Fatalf("record %q: %v", sc.Text(), err)
			}
			if r.TargetPath == target {
				out = append(out, r)
			}
		}
		return out
	}
	inlinePod := func(name string) *corev1.Pod {
		t.Helper()
		kubectl(t, a.env, podYAML(name, a.node, fmt.Sprintf(`  terminationGracePeriodSeconds: 1
  volumes:
  - name: secrets
    csi: {driver: %[2]s}
  containers:
  - name: c
    image: %[1]s
    command: ["sleep", "3600"]
    volumeMounts: [{name: secrets, mountPath: /secrets}]
`, testimage.Ref, cp.driver)), "apply", "-f", "-")
		return a.waitPod(ctx, name, 60*time.Second, "Running", running)
	}

	// No tokenRequests: no token key (podInfoOnMount is on, so the pod's
	// information is there).
	plain := inlinePod(a.node + "-plain")
	rs := publishes(plain.UID)
	if len(rs) == 0 {
		t.Fatalf("no NodePublishVolume recorded for %s", plain.Name)
	}
	if _, ok := rs[0].VolumeContext["csi.storage.k8s.io/serviceAccount.tokens"]; ok || rs[0].VolumeContext["csi.storage.k8s.io/pod.name"] != plain.Name {
		t.Errorf("volume context without tokenRequests: %v", rs[0].VolumeContext)
	}

	// tokenRequests and requiresRepublish are mutable.
	drv, err := admin.StorageV1().CSIDrivers().Get(ctx, cp.driver, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	yes := true
	drv.Spec.TokenRequests = []storagev1.TokenRequest{{Audience: "vault"}}
	drv.Spec.RequiresRepublish = &yes
	if _, err := admin.StorageV1().CSIDrivers().Update(ctx, drv, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	tp := inlinePod(a.node + "-tokens")
	runningAt := time.Now()
	rs = publishes(tp.UID)
	if len(rs) == 0 {
		t.Fatalf("no NodePublishVolume recorded for %s", tp.Name)
	}
	var tokens map[string]authenticationv1.TokenRequestStatus
	raw := rs[0].VolumeContext["csi.storage.k8s.io/serviceAccount.tokens"]
	if err := json.Unmarshal([]byte(raw), &tokens); err != nil || len(tokens) != 1 || tokens["vault"].Token == "" {
		t.Fatalf("tokens %q (%v), want one for audience vault", raw, err)
	}
	tok := tokens["vault"]
	if exp := tok.ExpirationTimestamp.Time; exp.Before(start.Add(59*time.Minute)) || exp.After(time.Now().Add(61*time.Minute)) {
		t.Errorf("token expires at %v, want in an hour (the API server's default)", exp)
	}
	review := func(audiences ...string) *authenticationv1.TokenReview {
		t.Helper()
		r, err := admin.AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{
			Spec: authenticationv1.TokenReviewSpec{Token: tok.Token, Audiences: audiences}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	st := review("vault").Status
	if !st.Authenticated || !slices.Equal(st.Audiences, []string{"vault"}) || st.User.Username != "system:serviceaccount:default:default" ||
		!slices.Equal(st.User.Extra["authentication.kubernetes.io/pod-name"], authenticationv1.ExtraValue{tp.Name}) ||
		!slices.Equal(st.User.Extra["authentication.kubernetes.io/pod-uid"], authenticationv1.ExtraValue{string(tp.UID)}) {
		t.Errorf("TokenReview for vault: %+v", st)
	}
	if st := review().Status; st.Authenticated {
		t.Errorf("the token is valid for the API server's own audience too: %+v", st)
	}

	// Republished at the pod's next syncs (the one after its container
	// started, at the latest the 1-minute resync), with the cached token
	// (checked below, after the update's republish too).
	var n int
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 75*time.Second, true, func(context.Context) (bool, error) {
		n = len(publishes(tp.UID))
		return n >= 2, nil
	})
	if err != nil {
		t.Fatalf("NodePublishVolume %d times in 75s for a requiresRepublish driver, want again at the pod's syncs", n)
	}
	t.Logf("NodePublishVolume #2 %.1fs after the pod was seen Running", time.Since(runningAt).Seconds())
	// A change of the pod is a sync, so a republish too: once the
	// start's syncs are over (no publish for 2s), an update brings one
	// within 10s, long before the next resync.
	quietSince, last := time.Now(), n
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		if n = len(publishes(tp.UID)); n != last {
			quietSince, last = time.Now(), n
		}
		return time.Since(quietSince) >= 2*time.Second, nil
	})
	if err != nil {
		t.Fatalf("NodePublishVolume for 30s without a pause of 2s (%d calls)", n)
	}
	kubectl(t, a.env, "", "label", "pod", tp.Name, "synced=again")
	labelled := time.Now()
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return len(publishes(tp.UID)) > n, nil
	})
	if err != nil {
		t.Errorf("no NodePublishVolume within 10s of the pod's update")
	}
	t.Logf("NodePublishVolume #%d %.1fs after the pod's update", n+1, time.Since(labelled).Seconds())
	for _, r := range publishes(tp.UID)[1:] {
		if r.VolumeContext["csi.storage.k8s.io/serviceAccount.tokens"] != raw {
			t.Errorf("republished with %q, want the cached token again", r.VolumeContext["csi.storage.k8s.io/serviceAccount.tokens"])
		}
	}
	if p, err := admin.CoreV1().Pods("default").Get(ctx, tp.Name, metav1.GetOptions{}); err != nil || !running(p) || p.Status.ContainerStatuses[0].RestartCount != 0 {
		t.Errorf("the pod after its republishes: %v %+v", err, p.Status)
	}

	// The pods go: unpublished, nothing stays mounted.
	for _, name := range []string{plain.Name, tp.Name} {
		if err := admin.CoreV1().Pods("default").Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	podsGone(t, a, plain.Name, tp.Name)
	for _, p := range []*corev1.Pod{plain, tp} {
		waitGone(t, filepath.Join(cp.root, "pods", string(p.UID)))
	}
	if err := admin.CoreV1().Pods("default").Delete(ctx, cp.name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	podsGone(t, a, cp.name)
}
