package runtime

import (
	"reflect"
	"testing"
)

type rawSpec []byte

func (s rawSpec) GetValue() []byte { return s }

func TestProcUserCache(t *testing.T) {
	var c procUserCache
	spec := rawSpec(`{"ociVersion":"1.1.0","process":{"user":{"uid":1000,"gid":3000,"additionalGids":[3000,50000,60000]},"args":["sh"]}}`)
	want := &ProcessUser{UID: 1000, GID: 3000, SupplementalGroups: []int64{3000, 50000, 60000}}
	if got := c.of("a", spec); !reflect.DeepEqual(got, want) {
		t.Fatalf("of = %+v, want %+v", got, want)
	}
	// Cached: the spec is not read again.
	if got := c.of("a", rawSpec("not json")); !reflect.DeepEqual(got, want) {
		t.Errorf("cached of = %+v, want %+v", got, want)
	}
	if got := c.of("b", rawSpec(`{"ociVersion":"1.1.0"}`)); got != nil {
		t.Errorf("no process: %+v, want nil", got)
	}
	c.forget(map[string]bool{"b": true})
	if got := c.of("a", rawSpec(`{"process":{"user":{"uid":0,"gid":0}}}`)); got == nil || got.UID != 0 {
		t.Errorf("after forget: %+v, want the new spec's root user", got)
	}
}
