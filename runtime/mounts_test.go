package runtime

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/nodeagent/nodeagent/internal/mountinfo"
)

func TestOCIMounts(t *testing.T) {
	dir := t.TempDir()
	shared := filepath.Join(dir, "shared")
	slave := filepath.Join(dir, "slave")
	private := filepath.Join(dir, "private")
	for _, d := range []string{shared, slave, private} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(shared, link); err != nil {
		t.Fatal(err)
	}
	// The mount each source is on, by resolved path.
	mounts := map[string]mountinfo.Mount{
		shared:  {MountPoint: shared, Optional: "shared:7"},
		slave:   {MountPoint: dir, Optional: "master:3"},
		private: {MountPoint: "/"},
	}
	lookup := func(p string) (mountinfo.Mount, error) {
		m, ok := mounts[p]
		if !ok {
			return mountinfo.Mount{}, errors.New("not in the table: " + p)
		}
		return m, nil
	}
	bind := func(src, dst string, opts ...string) specs.Mount {
		return specs.Mount{Type: "bind", Source: src, Destination: dst, Options: opts}
	}
	for _, tc := range []struct {
		desc       string
		in         []Mount
		want       []specs.Mount
		wantRootfs string
		wantErr    string
	}{
		{desc: "none"},
		{
			desc: "private mounts are rprivate, and their sources are not looked up",
			in:   []Mount{{HostPath: "/no/such", ContainerPath: "/a"}, {HostPath: "/no/ro", ContainerPath: "/b", ReadOnly: true}},
			want: []specs.Mount{bind("/no/such", "/a", "rbind", "rprivate", "rw"), bind("/no/ro", "/b", "rbind", "rprivate", "ro")},
		},
		{
			desc:       "host-to-container on a slave mount",
			in:         []Mount{{HostPath: slave, ContainerPath: "/s", Propagation: PropagationHostToContainer, ReadOnly: true}},
			want:       []specs.Mount{bind(slave, "/s", "rbind", "rslave", "ro")},
			wantRootfs: "rslave",
		},
		{
			desc:       "host-to-container on a shared mount",
			in:         []Mount{{HostPath: shared, ContainerPath: "/s", Propagation: PropagationHostToContainer}},
			want:       []specs.Mount{bind(shared, "/s", "rbind", "rslave", "rw")},
			wantRootfs: "rslave",
		},
		{
			desc: "bidirectional through a symlink: the resolved source; rshared wins over rslave",
			in: []Mount{
				{HostPath: slave, ContainerPath: "/h", Propagation: PropagationHostToContainer},
				{HostPath: link, ContainerPath: "/b", Propagation: PropagationBidirectional},
				{HostPath: slave, ContainerPath: "/h2", Propagation: PropagationHostToContainer},
			},
			want: []specs.Mount{
				bind(slave, "/h", "rbind", "rslave", "rw"),
				bind(shared, "/b", "rbind", "rshared", "rw"),
				bind(slave, "/h2", "rbind", "rslave", "rw"),
			},
			wantRootfs: "rshared",
		},
		{
			desc:    "bidirectional on a slave mount",
			in:      []Mount{{HostPath: slave, ContainerPath: "/b", Propagation: PropagationBidirectional}},
			wantErr: `path "` + slave + `" is mounted on "` + dir + `" but it is not a shared mount`,
		},
		{
			desc:    "host-to-container on a private mount",
			in:      []Mount{{HostPath: private, ContainerPath: "/h", Propagation: PropagationHostToContainer}},
			wantErr: `path "` + private + `" is mounted on "/" but it is not a shared or slave mount`,
		},
		{
			desc:    "missing source with propagation",
			in:      []Mount{{HostPath: filepath.Join(dir, "gone"), ContainerPath: "/h", Propagation: PropagationHostToContainer}},
			wantErr: "failed to resolve symlink",
		},
		{
			desc:    "unknown propagation",
			in:      []Mount{{HostPath: shared, ContainerPath: "/h", Propagation: 7}},
			wantErr: "unknown propagation Propagation(7)",
		},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			got, rootfs, err := ociMounts(tc.in, lookup)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tc.want) || (len(got) > 0 && !reflect.DeepEqual(got, tc.want)) {
				t.Errorf("mounts = %+v, want %+v", got, tc.want)
			}
			if rootfs != tc.wantRootfs {
				t.Errorf("rootfsPropagation = %q, want %q", rootfs, tc.wantRootfs)
			}
		})
	}
}

// lookupMount reads the agent's real mount table: /proc is on a mount of
// its own, and a path under it is on that mount.
func TestLookupMount(t *testing.T) {
	m, err := lookupMount("/proc/self")
	if err != nil {
		t.Fatal(err)
	}
	if m.MountPoint != "/proc" {
		t.Errorf("lookupMount(/proc/self) = %q, want /proc", m.MountPoint)
	}
}
