package main

import (
	"os"
	"path/filepath"
	"testing"
)

// The agent's cgroup memory limit is the smallest memory.high or
// memory.max of its cgroup and its ancestors on v2 (systemd's MemoryHigh=
// on the service's own cgroup, or a limit on its slice), the v1 memory
// controller's memory.limit_in_bytes on a hybrid or v1 host, and none when
// every file says max or unlimited.
func TestOwnCgroupMemoryLimit(t *testing.T) {
	type file struct{ path, content string }
	for _, tc := range []struct {
		name       string
		procCgroup string
		files      []file
		want       int64
		wantFrom   string
	}{{
		name:       "v2 MemoryHigh on the service",
		procCgroup: "0::/system.slice/nodeagent.service\n",
		files: []file{
			{"cgroup.controllers", "cpuset cpu io memory hugetlb pids rdma misc\n"},
			{"system.slice/memory.high", "max\n"},
			{"system.slice/memory.max", "max\n"},
			{"system.slice/nodeagent.service/memory.high", "33554432\n"},
			{"system.slice/nodeagent.service/memory.max", "max\n"},
		},
		want: 33554432, wantFrom: "system.slice/nodeagent.service/memory.high",
	}, {
		name:       "v2 a smaller limit on the slice",
		procCgroup: "0::/system.slice/nodeagent.service\n",
		files: []file{
			{"cgroup.controllers", "cpu memory pids\n"},
			{"system.slice/memory.max", "20971520\n"},
			{"system.slice/nodeagent.service/memory.high", "33554432\n"},
			{"system.slice/nodeagent.service/memory.max", "67108864\n"},
		},
		want: 20971520, wantFrom: "system.slice/memory.max",
	}, {
		name:       "v2 no limit",
		procCgroup: "0::/system.slice/nodeagent.service\n",
		files: []file{
			{"cgroup.controllers", "cpu memory pids\n"},
			{"system.slice/memory.high", "max\n"},
			{"system.slice/nodeagent.service/memory.high", "max\n"},
			{"system.slice/nodeagent.service/memory.max", "max\n"},
		},
	}, {
		name:       "v2 without the memory controller",
		procCgroup: "0::/system.slice/nodeagent.service\n",
		files:      []file{{"cgroup.controllers", "cpu pids\n"}},
	}, {
		name:       "hybrid: the v1 memory controller",
		procCgroup: "12:pids:/system.slice/nodeagent.service\n5:memory:/system.slice/nodeagent.service\n4:cpu,cpuacct:/system.slice/nodeagent.service\n0::/system.slice/nodeagent.service\n",
		files: []file{
			{"memory/memory.limit_in_bytes", "9223372036854771712\n"},
			{"memory/system.slice/memory.limit_in_bytes", "9223372036854771712\n"},
			{"memory/system.slice/nodeagent.service/memory.limit_in_bytes", "50331648\n"},
		},
		want: 50331648, wantFrom: "memory/system.slice/nodeagent.service/memory.limit_in_bytes",
	}, {
		name:       "v1 unlimited",
		procCgroup: "5:memory:/user.slice\n",
		files: []file{
			{"memory/memory.limit_in_bytes", "9223372036854771712\n"},
			{"memory/user.slice/memory.limit_in_bytes", "9223372036854771712\n"},
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			for _, f := range tc.files {
				p := filepath.Join(root, f.path)
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte(f.content), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			got, from, err := ownCgroupMemoryLimit([]byte(tc.procCgroup), root)
			if err != nil {
				t.Fatal(err)
			}
			wantFrom := ""
			if tc.wantFrom != "" {
				wantFrom = filepath.Join(root, tc.wantFrom)
			}
			if got != tc.want || from != wantFrom {
				t.Errorf("got %d from %q, want %d from %q", got, from, tc.want, wantFrom)
			}
		})
	}
}

// A garbled limit file is an error, not "no limit".
func TestOwnCgroupMemoryLimitGarbled(t *testing.T) {
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "cgroup.controllers"), []byte("memory\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "memory.high"), []byte("lots\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := ownCgroupMemoryLimit([]byte("0::/\n"), root); err == nil {
		t.Error("no error for memory.high \"lots\"")
	}
}

// The runtime gets 3/4 of the cgroup's limit: 24 MiB of MemoryHigh=32M.
func TestGoMemoryLimit(t *testing.T) {
	if got := goMemoryLimit(32 << 20); got != 24<<20 {
		t.Errorf("goMemoryLimit(32 MiB) = %d, want %d", got, 24<<20)
	}
}
