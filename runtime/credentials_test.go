package runtime_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nodeagent/nodeagent/internal/testing/testimage"
	"github.com/nodeagent/nodeagent/runtime"
)

// A registry with basic auth refuses anonymous and wrong credentials with
// 401 (named in the error, as kubelet's ErrImagePull message shows it) and
// serves the image to the right ones.
func TestPullImageWithAuth(t *testing.T) {
	rt, _ := newRuntime(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	reg, err := testimage.NewRegistry(map[string]string{"alice": "s3cret"})
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	ref := reg.Host + "/private/busybox:v1"

	for _, tc := range []struct {
		name string
		auth *runtime.RegistryAuth
	}{
		{"anonymous", nil},
		{"wrong password", &runtime.RegistryAuth{Username: "alice", Password: "nope"}},
		{"unknown user", &runtime.RegistryAuth{Username: "bob", Password: "s3cret"}},
	} {
		before := reg.Unauthorized()
		_, err := rt.PullImageWithAuth(ctx, ref, tc.auth)
		if err == nil {
			t.Fatalf("%s: pull succeeded", tc.name)
		}
		if !strings.Contains(err.Error(), "401") || !strings.Contains(err.Error(), ref) {
			t.Fatalf("%s: error %q does not name the 401 and the reference", tc.name, err)
		}
		if reg.Unauthorized() == before {
			t.Fatalf("%s: the registry refused nothing", tc.name)
		}
		t.Logf("%s: %v", tc.name, err)
	}
	if _, err := rt.GetImage(ctx, ref); err == nil {
		t.Fatal("a refused pull stored the image")
	}

	img, err := rt.PullImageWithAuth(ctx, ref, &runtime.RegistryAuth{Username: "alice", Password: "s3cret"})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := rt.GetImage(ctx, ref); err != nil || got.ID != img.ID {
		t.Fatalf("GetImage(%q) = %+v, %v", ref, got, err)
	}
	if reg.Manifests() == 0 {
		t.Fatal("the registry served no manifest")
	}
}
