package runtime

import (
	"reflect"
	"testing"
)

type rawSpec []byte

func (s rawSpec) GetValue() []byte { return s }

func TestSpecCache(t *testing.T) {
	var c specCache
	spec := rawSpec(`{"ociVersion":"1.1.0","process":{"user":{"uid":1000,"gid":3000,"additionalGids":[3000,50000,60000]},"args":["sh"]},"linux":{"cgroupsPath":"/kubepods/burstable/pod1/a"}}`)
	want := &ProcessUser{UID: 1000, GID: 3000, SupplementalGroups: []int64{3000, 50000, 60000}}
	if got := c.of("a", spec); !reflect.DeepEqual(got.user, want) || got.cgroupsPath != "/kubepods/burstable/pod1/a" {
		t.Fatalf("of = %+v, want user %+v and the cgroups path", got, want)
	}
	// Cached: the spec is not read again.
	if got := c.of("a", rawSpec("not json")); !reflect.DeepEqual(got.user, want) || got.cgroupsPath != "/kubepods/burstable/pod1/a" {
		t.Errorf("cached of = %+v, want %+v", got, want)
	}
	if got := c.of("b", rawSpec(`{"ociVersion":"1.1.0"}`)); got.user != nil || got.cgroupsPath != "" {
		t.Errorf("no process, no linux: %+v, want nothing", got)
	}
	// A spec that does not decode is not cached.
	if got := c.of("c", rawSpec("not json")); got.user != nil {
		t.Errorf("bad spec: %+v", got)
	}
	if got := c.of("c", rawSpec(`{"process":{"user":{"uid":7}}}`)); got.user == nil || got.user.UID != 7 {
		t.Errorf("after a bad spec: %+v, want uid 7", got)
	}
	c.forget(map[string]bool{"b": true})
	if got := c.of("a", rawSpec(`{"process":{"user":{"uid":0,"gid":0}}}`)); got.user == nil || got.user.UID != 0 {
		t.Errorf("after forget: %+v, want the new spec's root user", got)
	}
}
