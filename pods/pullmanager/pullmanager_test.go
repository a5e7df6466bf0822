package pullmanager

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	testclock "k8s.io/utils/clock/testing"
)

func newManager(t *testing.T, policy string, allow []string) (*Manager, string) {
	t.Helper()
	p, err := NewPolicy(policy, allow)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	m, err := New(dir, p, testclock.NewFakeClock(time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)))
	if err != nil {
		t.Fatal(err)
	}
	return m, dir
}

var (
	secretA = Secret{UID: "uid-a", Namespace: "team-a", Name: "regcred", CredentialHash: CredentialHash("alice", "pw")}
	secretB = Secret{UID: "uid-b", Namespace: "team-b", Name: "regcred", CredentialHash: CredentialHash("bob", "other")}
)

const (
	image = "127.0.0.1:5000/private/app:1"
	ref   = "sha256:1111"
)

// An image the agent pulled with team-a's secret is served to a pod that
// presents it, and pulled again for one that presents another secret or
// none; a secret with the same credentials under another name also
// counts (and is remembered).
func TestMustPullWithSecrets(t *testing.T) {
	m, dir := newManager(t, NeverVerifyPreloadedImages, nil)
	if !m.MustPull(image, "", nil) {
		t.Error("an absent image must be pulled")
	}
	if err := m.RecordIntent(image); err != nil {
		t.Fatal(err)
	}
	if err := m.RecordPulled(image, ref, Credentials{KubernetesSecrets: []Secret{secretA}}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "image_manager", "pulling", fileName(image))); !os.IsNotExist(err) {
		t.Errorf("the intent was not removed after the pull: %v", err)
	}
	for _, tc := range []struct {
		desc    string
		image   string
		secrets []Secret
		want    bool
	}{
		{"the same secret", image, []Secret{secretA}, false},
		{"another tag of the same image, same secret", "127.0.0.1:5000/private/app:2", []Secret{secretA}, false},
		{"another secret", image, []Secret{secretB}, true},
		{"no secret", image, nil, true},
		{"same credentials, another secret", image, []Secret{{UID: "uid-c", Namespace: "team-c", Name: "copy", CredentialHash: secretA.CredentialHash}}, false},
		{"same secret, rotated credentials", image, []Secret{{UID: "uid-a", Namespace: "team-a", Name: "regcred", CredentialHash: "new"}}, false},
	} {
		if got := m.MustPull(tc.image, ref, tc.secrets); got != tc.want {
			t.Errorf("%s: MustPull = %v, want %v", tc.desc, got, tc.want)
		}
	}
	// The file is kubelet's ImagePulledRecord, and the copy is now
	// recorded by its coordinates too.
	data, err := os.ReadFile(filepath.Join(dir, "image_manager", "pulled", fileName(ref)))
	if err != nil {
		t.Fatal(err)
	}
	var rec kubeletv1beta1.ImagePulledRecord
	if err := json.Unmarshal(data, &rec); err != nil {
		t.Fatal(err)
	}
	if rec.Kind != "ImagePulledRecord" || rec.APIVersion != "kubelet.config.k8s.io/v1beta1" || rec.ImageRef != ref {
		t.Errorf("record %s", data)
	}
	got := rec.CredentialMapping["127.0.0.1:5000/private/app"].KubernetesSecrets
	if len(got) != 2 || got[0].Name != "regcred" || got[0].CredentialHash != "new" || got[1].Name != "copy" {
		t.Errorf("secrets recorded %+v, want team-a's with its rotated hash, and the copy", got)
	}
	if strings.Contains(string(data), "alice") || strings.Contains(string(data), "pw") {
		t.Errorf("credentials in the record: %s", data)
	}
}

// Pulled with node-wide (or no) credentials: anyone; a pull in progress
// (an intent) makes the image the agent's.
func TestMustPullNodeWideAndIntents(t *testing.T) {
	m, _ := newManager(t, NeverVerifyPreloadedImages, nil)
	if m.MustPull(image, ref, nil) {
		t.Error("a preloaded image (no record, no intent) must be served under NeverVerifyPreloadedImages")
	}
	if err := m.RecordIntent(image); err != nil {
		t.Fatal(err)
	}
	if !m.MustPull(image, ref, nil) {
		t.Error("an image being pulled by the agent was served without a check")
	}
	m.RecordFailed(image)
	if m.MustPull(image, ref, nil) {
		t.Error("after a failed pull the intent stayed")
	}
	if err := m.RecordIntent(image); err != nil {
		t.Fatal(err)
	}
	if err := m.RecordPulled(image, ref, Credentials{NodePodsAccessible: true}); err != nil {
		t.Fatal(err)
	}
	if m.MustPull(image, ref, []Secret{secretB}) || m.MustPull(image, ref, nil) {
		t.Error("an image pulled with node-wide credentials must be served to every pod")
	}
	// A later pull with a secret does not narrow it.
	if err := m.RecordPulled(image, ref, Credentials{KubernetesSecrets: []Secret{secretA}}); err != nil {
		t.Fatal(err)
	}
	if m.MustPull(image, ref, nil) {
		t.Error("node-wide access was narrowed")
	}
}

// The records survive a restart: a new manager on the same directory
// decides the same.
func TestRecordsSurviveRestart(t *testing.T) {
	m, dir := newManager(t, NeverVerifyPreloadedImages, nil)
	_ = m.RecordIntent(image)
	_ = m.RecordPulled(image, ref, Credentials{KubernetesSecrets: []Secret{secretA}})
	p, _ := NewPolicy(NeverVerifyPreloadedImages, nil)
	m2, err := New(dir, p, testclock.NewFakeClock(time.Now()))
	if err != nil {
		t.Fatal(err)
	}
	if !m2.MustPull(image, ref, []Secret{secretB}) || m2.MustPull(image, ref, []Secret{secretA}) {
		t.Error("a restarted manager decided differently")
	}
	// An intent left by a crash mid-pull counts as the agent's pull.
	_ = m2.RecordIntent("other:1")
	m3, _ := New(dir, p, testclock.NewFakeClock(time.Now()))
	if !m3.MustPull("other:1", "sha256:2222", nil) {
		t.Error("an intent left on disk was ignored")
	}
}

func TestPolicies(t *testing.T) {
	allow := []string{"127.0.0.1:5000/public/*", "docker.io/library/busybox"}
	for _, tc := range []struct {
		policy        string
		image         string
		pulledByAgent bool
		want          bool
	}{
		{NeverVerify, image, true, false},
		{NeverVerifyPreloadedImages, image, false, false},
		{NeverVerifyPreloadedImages, image, true, true},
		{AlwaysVerify, image, false, true},
		{NeverVerifyAllowlistedImages, "127.0.0.1:5000/public/x:1", true, false},
		{NeverVerifyAllowlistedImages, "docker.io/library/busybox", false, false},
		{NeverVerifyAllowlistedImages, image, false, true},
	} {
		p, err := NewPolicy(tc.policy, allow)
		if err != nil {
			t.Fatal(err)
		}
		if got := p(tc.image, tc.pulledByAgent); got != tc.want {
			t.Errorf("%s(%s, pulled by agent %v) = %v, want %v", tc.policy, tc.image, tc.pulledByAgent, got, tc.want)
		}
	}
	if _, err := NewPolicy("Sometimes", nil); err == nil || err.Error() != "unknown image pull credential verification policy: Sometimes" {
		t.Errorf("unknown policy: %v", err)
	}
	for _, bad := range []string{" x", "*", "/*", "a/*/b", "busybox:1", "docker.io/library/busybox@sha256:" + strings.Repeat("a", 64)} {
		if err := ValidateAllowlist([]string{bad}); err == nil {
			t.Errorf("pattern %q accepted", bad)
		}
	}
	if err := ValidateAllowlist(allow); err != nil {
		t.Errorf("valid patterns refused: %v", err)
	}
}
