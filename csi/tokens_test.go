package csi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	testingclock "k8s.io/utils/clock/testing"
	utilptr "k8s.io/utils/ptr"

	"github.com/nodeagent/nodeagent/internal/testing/faketoken"
	"github.com/nodeagent/nodeagent/pods/volume"
)

var tokT0 = time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)

// newTokenRig is newMounterRig with the driver's CSIDriver drv, a token
// cache over the fake API server and an event recorder.
func newTokenRig(t *testing.T, drv *storagev1.CSIDriver) (*mounterRig, *faketoken.Server, *record.FakeRecorder) {
	t.Helper()
	rig := newMounterRig(t, drv)
	api := &faketoken.Server{Clock: testingclock.NewFakeClock(tokT0)}
	api.Install(rig.client)
	rig.m.Tokens = volume.NewTokens(func(ns string) volume.ServiceAccountClient { return rig.client.CoreV1().ServiceAccounts(ns) },
		testingclock.NewFakeClock(tokT0), nil)
	rec := record.NewFakeRecorder(20)
	rig.m.Recorder = rec
	return rig, api, rec
}

func tokenDriver(podInfo bool, republish bool, reqs ...storagev1.TokenRequest) *storagev1.CSIDriver {
	return &storagev1.CSIDriver{
		ObjectMeta: metav1.ObjectMeta{Name: "fake.csi"},
		Spec: storagev1.CSIDriverSpec{AttachRequired: boolp(false), PodInfoOnMount: boolp(podInfo), RequiresRepublish: boolp(republish),
			VolumeLifecycleModes: []storagev1.VolumeLifecycleMode{storagev1.VolumeLifecycleEphemeral}, TokenRequests: reqs},
	}
}

func inlinePod() *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "uid-t"},
		Spec: v1.PodSpec{ServiceAccountName: "sa", Volumes: []v1.Volume{{Name: "secrets", VolumeSource: v1.VolumeSource{CSI: &v1.CSIVolumeSource{
			Driver: "fake.csi", VolumeAttributes: map[string]string{"k": "v"}}}}}},
	}
}

// kubelet's podServiceAccountTokenAttrs: tokens for every tokenRequest,
// whether or not the driver has podInfoOnMount, bound to the pod, as the
// JSON object audience → TokenRequestStatus under
// csi.storage.k8s.io/serviceAccount.tokens; none without tokenRequests.
func TestMounterServiceAccountTokens(t *testing.T) {
	ctx := context.Background()
	rig, api, _ := newTokenRig(t, tokenDriver(false, false,
		storagev1.TokenRequest{Audience: "vault", ExpirationSeconds: utilptr.To[int64](600)}, storagev1.TokenRequest{Audience: ""}))
	pod := inlinePod()
	if _, err := rig.m.SetUp(ctx, pod, rig.podDir("uid-t"), &pod.Spec.Volumes[0]); err != nil {
		t.Fatal(err)
	}
	vc := rig.f.publish[0].VolumeContext
	if _, ok := vc[ctxPodName]; ok {
		t.Errorf("pod info without podInfoOnMount: %v", vc)
	}
	if vc["k"] != "v" {
		t.Errorf("the volume's attributes are missing: %v", vc)
	}
	var got map[string]authenticationv1.TokenRequestStatus
	if err := json.Unmarshal([]byte(vc["csi.storage.k8s.io/serviceAccount.tokens"]), &got); err != nil {
		t.Fatalf("%v in %q", err, vc["csi.storage.k8s.io/serviceAccount.tokens"])
	}
	want := map[string]authenticationv1.TokenRequestStatus{
		"vault": {Token: "token-1", ExpirationTimestamp: metav1.NewTime(tokT0.Add(600 * time.Second))},
		"":      {Token: "token-2", ExpirationTimestamp: metav1.NewTime(tokT0.Add(time.Hour))},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("tokens (-want +got):\n%s", d)
	}
	if want := `{"":{"token":"token-2","expirationTimestamp":"2026-11-29T11:00:00Z"},"vault":{"token":"token-1","expirationTimestamp":"2026-11-29T10:10:00Z"}}`; vc[ctxServiceAccountTokens] != want {
		t.Errorf("JSON %s, want %s", vc[ctxServiceAccountTokens], want)
	}
	ref := &authenticationv1.BoundObjectReference{APIVersion: "v1", Kind: "Pod", Name: "p", UID: "uid-t"}
	wantReqs := []authenticationv1.TokenRequestSpec{
		{Audiences: []string{"vault"}, ExpirationSeconds: utilptr.To[int64](600), BoundObjectRef: ref},
		{BoundObjectRef: ref}, // no audience, the server's expiration
	}
	for i, r := range api.Requests() {
		if d := cmp.Diff(wantReqs[i], r.Spec); d != "" || api.ServiceAccounts()[i] != "sa" {
			t.Errorf("TokenRequest %d for %s (-want +got):\n%s", i, api.ServiceAccounts()[i], d)
		}
	}

	// Without tokenRequests (and with podInfoOnMount): no token key, no
	// request.
	rig2, api2, _ := newTokenRig(t, tokenDriver(true, false))
	if _, err := rig2.m.SetUp(ctx, pod, rig2.podDir("uid-t"), &pod.Spec.Volumes[0]); err != nil {
		t.Fatal(err)
	}
	vc = rig2.f.publish[0].VolumeContext
	if _, ok := vc[ctxServiceAccountTokens]; ok || api2.Count() != 0 || vc[ctxPodName] != "p" {
		t.Errorf("volume context %v after %d token requests; want pod info and no tokens", vc, api2.Count())
	}
}

// A token that cannot be had fails the publish with kubelet's message;
// the driver is not called and nothing of the volume stays.
func TestMounterServiceAccountTokenFails(t *testing.T) {
	ctx := context.Background()
	rig, api, _ := newTokenRig(t, tokenDriver(false, false, storagev1.TokenRequest{Audience: "vault"}))
	api.SetFail(apierrors.NewForbidden(authenticationv1.Resource("serviceaccounts/token"), "sa", errors.New(`audience "vault" not found in pod spec volume, system:node:n1 is not authorized to request tokens for this audience`)))
	pod := inlinePod()
	_, err := rig.m.SetUp(ctx, pod, rig.podDir("uid-t"), &pod.Spec.Volumes[0])
	want := `MountVolume.SetUp failed for volume "secrets" : kubernetes.io/csi: mounter.SetUpAt failed to get service accoount token attributes: failed to fetch token: serviceaccounts/token.authentication.k8s.io "sa" is forbidden: audience "vault" not found in pod spec volume`
	if err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("SetUp = %v, want %s...", err, want)
	}
	if !apierrors.IsForbidden(err) {
		t.Errorf("%v does not wrap the API error", err)
	}
	if calls := rig.f.Calls(); slices.Contains(calls, "NodePublishVolume") {
		t.Errorf("calls %v: published without its tokens", calls)
	}
	if _, err := os.Stat(filepath.Join(rig.podDir("uid-t"), "volumes/kubernetes.io~csi/secrets")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("volume directory after the failure: %v", err)
	}
	// No token source (no API server): a driver with tokenRequests fails.
	rig.m.Tokens = nil
	if _, err := rig.m.SetUp(ctx, pod, rig.podDir("uid-t"), &pod.Spec.Volumes[0]); err == nil || !strings.Contains(err.Error(), "service accoount token attributes") {
		t.Errorf("SetUp without tokens = %v", err)
	}
}

// requiresRepublish: every SetUp of a published volume (each pod sync)
// is NodePublishVolume again, with the cached tokens; without it, none. A
// republish that fails is a FailedMount Event and the pod keeps its
// volume.
func TestMounterRepublish(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a tmpfs as the published volume")
	}
	ctx := context.Background()
	for _, republish := range []bool{true, false} {
		t.Run(fmt.Sprint("requiresRepublish=", republish), func(t *testing.T) {
			rig, api, rec := newTokenRig(t, tokenDriver(true, republish, storagev1.TokenRequest{Audience: "vault"}))
			pod := inlinePod()
			target, err := rig.m.SetUp(ctx, pod, rig.podDir("uid-t"), &pod.Spec.Volumes[0])
			if err != nil {
				t.Fatal(err)
			}
			// The fake driver mounts nothing: a tmpfs plays its mount.
			if err := syscall.Mount("tmpfs", target, "tmpfs", 0, "size=1m"); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { syscall.Unmount(target, syscall.MNT_DETACH) })
			for range 2 {
				if p, err := rig.m.SetUp(ctx, pod, rig.podDir("uid-t"), &pod.Spec.Volumes[0]); err != nil || p != target {
					t.Fatalf("SetUp of the published volume = %q, %v", p, err)
				}
			}
			n := 1
			if republish {
				n = 3
			}
			if got := len(rig.f.publish); got != n {
				t.Fatalf("%d NodePublishVolume calls (%v), want %d", got, rig.f.Calls(), n)
			}
			for _, p := range rig.f.publish {
				if p.TargetPath != target || p.VolumeContext[ctxPodName] != "p" || !strings.Contains(p.VolumeContext[ctxServiceAccountTokens], `"token":"token-1"`) {
					t.Errorf("publish %+v", p)
				}
			}
			if api.Count() != 1 {
				t.Errorf("%d token requests, want 1 (cached)", api.Count())
			}
			if !republish {
				return
			}
			rig.f.mu.Lock()
			rig.f.publishErr = status.Error(codes.Internal, "vault is sealed")
			rig.f.mu.Unlock()
			if p, err := rig.m.SetUp(ctx, pod, rig.podDir("uid-t"), &pod.Spec.Volumes[0]); err != nil || p != target {
				t.Fatalf("SetUp with a failing republish = %q, %v; want the volume kept", p, err)
			}
			ev := drain(rec)
			if want := `Warning FailedMount MountVolume.SetUp failed for volume "secrets" : rpc error: code = Internal desc = vault is sealed`; !slices.Contains(ev, want) {
				t.Errorf("events %q, want %q", ev, want)
			}
			if mounted, _ := isMountPoint(target); !mounted {
				t.Error("a failed republish unmounted the volume")
			}
		})
	}
}
