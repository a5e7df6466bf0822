package runtime_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/nodeagent/nodeagent/runtime"
)

// A container created under a nested pod cgroup (kubelet's layout) runs
// there, with the OOM score adjustment it was given.
func TestContainerInNestedPodCgroupWithOOMScoreAdj(t *testing.T) {
	rt, cd := newRuntime(t)
	ctx := context.Background()
	parent := cd.CgroupParent + "/kubepods/burstable/poduid-oom"
	for _, tc := range []struct {
		name string
		adj  *int
		want string
	}{
		{"burstable", ptrInt(750), "750"},
		{"guaranteed", ptrInt(-997), guaranteedWant()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := spec("oom", tc.name, "sleep", "60")
			s.CgroupParent = parent
			s.OOMScoreAdj = tc.adj
			id, err := rt.CreateContainer(ctx, s)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				_ = rt.StopContainer(context.Background(), id, 0)
				_ = rt.RemoveContainer(context.Background(), id)
			})
			if err := rt.StartContainer(ctx, id); err != nil {
				t.Fatal(err)
			}
			c := waitState(t, rt, id, runtime.StateRunning)
			if c.CgroupsPath != parent+"/"+id {
				t.Errorf("CgroupsPath = %q, want %q", c.CgroupsPath, parent+"/"+id)
			}
			b, err := os.ReadFile(fmt.Sprintf("/proc/%d/oom_score_adj", c.Pid))
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.TrimSpace(string(b)); got != tc.want {
				t.Errorf("oom_score_adj = %s, want %s", got, tc.want)
			}
			cg, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", c.Pid))
			if !strings.Contains(string(cg), parent+"/"+id+"\n") {
				t.Errorf("/proc/%d/cgroup does not name %s:\n%s", c.Pid, parent+"/"+id, cg)
			}
		})
	}
}

func ptrInt(v int) *int { return &v }

// guaranteedWant is -997, or this process's own score where it may not go
// lower (no CAP_SYS_RESOURCE, as in some sandboxes).
func guaranteedWant() string {
	st, _ := os.ReadFile("/proc/self/status")
	for _, l := range strings.Split(string(st), "\n") {
		if h, ok := strings.CutPrefix(l, "CapEff:"); ok {
			if caps, err := strconv.ParseUint(strings.TrimSpace(h), 16, 64); err == nil && caps&(1<<24) == 0 {
				b, _ := os.ReadFile("/proc/self/oom_score_adj")
				return strings.TrimSpace(string(b))
			}
		}
	}
	return "-997"
}
