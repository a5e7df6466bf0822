package mountinfo

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// sample is a hybrid-cgroup Debian host with systemd (shared propagation),
// a container runtime's mounts and a pod volume whose path has a space.
const sample = `21 26 0:20 / /proc rw,nosuid,nodev,noexec,relatime shared:12 - proc proc rw
22 26 0:21 / /sys rw,nosuid,nodev,noexec,relatime shared:2 - sysfs sysfs rw
26 1 254:1 / / rw,relatime shared:1 - ext4 /dev/vda1 rw,errors=remount-ro
30 22 0:27 / /sys/fs/cgroup ro,nosuid,nodev,noexec shared:4 - tmpfs tmpfs ro,mode=755
31 30 0:28 / /sys/fs/cgroup/unified rw,nosuid,nodev,noexec,relatime shared:5 - cgroup2 cgroup2 rw,nsdelegate
32 30 0:29 / /sys/fs/cgroup/systemd rw,nosuid,nodev,noexec,relatime shared:6 - cgroup cgroup rw,xattr,name=systemd
33 30 0:30 / /sys/fs/cgroup/cpu,cpuacct rw,nosuid,nodev,noexec,relatime shared:7 - cgroup cgroup rw,cpu,cpuacct
34 30 0:31 / /sys/fs/cgroup/memory rw,nosuid,nodev,noexec,relatime shared:8 - cgroup cgroup rw,memory
40 26 0:4 net:[4026532176] /run/nodeagent/netns/4de0b447 rw - nsfs nsfs rw
41 26 0:38 / /var/lib/nodeagent/pods/u1/volumes/empty\040dir/mem rw,nosuid,nodev,relatime shared:20 master:3 - tmpfs tmpfs rw,size=8192k,mode=777
42 26 254:1 /srv/data /var/lib/nodeagent/pods/u1/volumes/host rw,relatime shared:1 - ext4 /dev/vda1 rw,errors=remount-ro
43 26 0:39 / /var/lib/nodeagent/pods/u10/volumes/x rw,relatime - tmpfs tmpfs rw
44 26 0:40 / /mnt/odd\011tab\012nl\134bs rw,relatime propagate_from:2 unbindable - fuse.sshfs user@host:/a\040b rw,user_id=0
45 26 0:41 / /mnt/nosource rw,relatime - tmpfs  rw
`

func TestParseSample(t *testing.T) {
	ms, err := Parse(strings.NewReader(sample))
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 14 {
		t.Fatalf("got %d mounts, want 14", len(ms))
	}
	for _, tc := range []struct {
		i    int
		want Mount
	}{
		{0, Mount{Root: "/", MountPoint: "/proc", Options: "rw,nosuid,nodev,noexec,relatime", FSType: "proc", Source: "proc", SuperOptions: "rw", Optional: "shared:12"}},
		{4, Mount{Root: "/", MountPoint: "/sys/fs/cgroup/unified", Options: "rw,nosuid,nodev,noexec,relatime", FSType: "cgroup2", Source: "cgroup2", SuperOptions: "rw,nsdelegate", Optional: "shared:5"}},
		{8, Mount{Root: "net:[4026532176]", MountPoint: "/run/nodeagent/netns/4de0b447", Options: "rw", FSType: "nsfs", Source: "nsfs", SuperOptions: "rw"}},
		{9, Mount{Root: "/", MountPoint: "/var/lib/nodeagent/pods/u1/volumes/empty dir/mem", Options: "rw,nosuid,nodev,relatime", FSType: "tmpfs", Source: "tmpfs", SuperOptions: "rw,size=8192k,mode=777", Optional: "shared:20 master:3"}},
		{10, Mount{Root: "/srv/data", MountPoint: "/var/lib/nodeagent/pods/u1/volumes/host", Options: "rw,relatime", FSType: "ext4", Source: "/dev/vda1", SuperOptions: "rw,errors=remount-ro", Optional: "shared:1"}},
		{12, Mount{Root: "/", MountPoint: "/mnt/odd\ttab\nnl\\bs", Options: "rw,relatime", FSType: "fuse.sshfs", Source: "user@host:/a b", SuperOptions: "rw,user_id=0", Optional: "propagate_from:2 unbindable"}},
		{13, Mount{Root: "/", MountPoint: "/mnt/nosource", Options: "rw,relatime", FSType: "tmpfs", Source: "", SuperOptions: "rw"}},
	} {
		if ms[tc.i] != tc.want {
			t.Errorf("mount %d = %+v, want %+v", tc.i, ms[tc.i], tc.want)
		}
	}

	wantCgroups := []string{"/sys/fs/cgroup/unified", "/sys/fs/cgroup/systemd", "/sys/fs/cgroup/cpu,cpuacct", "/sys/fs/cgroup/memory"}
	if got := CgroupMountPoints(ms); !slices.Equal(got, wantCgroups) {
		t.Errorf("CgroupMountPoints = %q, want %q", got, wantCgroups)
	}
	wantUnder := []string{"/var/lib/nodeagent/pods/u1/volumes/empty dir/mem", "/var/lib/nodeagent/pods/u1/volumes/host"}
	if got := MountPointsUnder(ms, "/var/lib/nodeagent/pods/u1"); !slices.Equal(got, wantUnder) {
		t.Errorf("MountPointsUnder = %q, want %q", got, wantUnder)
	}
}

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		desc    string
		in      string
		want    []Mount
		wantErr string // substring; "" means no error
	}{
		{desc: "empty input", in: ""},
		{desc: "blank lines skipped", in: "\n\n"},
		{
			desc: "no optional fields, no trailing newline",
			in:   "1 0 8:1 / / rw - ext4 /dev/sda1 rw",
			want: []Mount{{Root: "/", MountPoint: "/", Options: "rw", FSType: "ext4", Source: "/dev/sda1", SuperOptions: "rw"}},
		},
		{
			desc: "several optional fields",
			in:   "2 1 0:5 / /a rw shared:1 master:2 propagate_from:3 unbindable - tmpfs tmpfs rw\n",
			want: []Mount{{Root: "/", MountPoint: "/a", Options: "rw", FSType: "tmpfs", Source: "tmpfs", SuperOptions: "rw",
				Optional: "shared:1 master:2 propagate_from:3 unbindable"}},
		},
		{
			// A "-" before field 7 is a path, not the separator.
			desc: "dash as root",
			in:   "2 1 0:5 - /a rw - tmpfs tmpfs rw\n",
			want: []Mount{{Root: "-", MountPoint: "/a", Options: "rw", FSType: "tmpfs", Source: "tmpfs", SuperOptions: "rw"}},
		},
		{
			desc: "empty super options",
			in:   "2 1 0:5 / /a rw - tmpfs tmpfs \n",
			want: []Mount{{Root: "/", MountPoint: "/a", Options: "rw", FSType: "tmpfs", Source: "tmpfs"}},
		},
		{
			desc:    "no separator",
			in:      "1 0 8:1 / / rw shared:1 ext4 /dev/sda1 rw\n",
			wantErr: `line 1: no " - " separator`,
		},
		{
			desc:    "nothing after the separator",
			in:      "1 0 8:1 / / rw shared:1 master:2 - ext4\n",
			wantErr: `line 1: want filesystem type, source and super options`,
		},
		{
			desc:    "too few fields",
			in:      "1 0 8:1 / / rw - ext4\n",
			wantErr: "line 1: 8 fields, want at least 10",
		},
		{
			desc:    "/proc/mounts format",
			in:      "1 0 8:1 / / rw - ext4 /dev/sda1 rw\n/dev/sda1 / ext4 rw,relatime 0 0\n",
			wantErr: "line 2: 6 fields",
		},
		{
			desc:    "relative mount point",
			in:      "1 0 8:1 / a rw - ext4 /dev/sda1 rw\n",
			wantErr: `line 1: mount point "a" is not absolute`,
		},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			got, err := Parse(strings.NewReader(tc.in))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

// A line longer than bufio.Scanner's default 64 KiB token still parses.
func TestParseLongLine(t *testing.T) {
	mp := "/" + strings.Repeat(`d\040`, 20000)
	ms, err := Parse(strings.NewReader("1 0 0:1 / " + mp + " rw - tmpfs tmpfs rw\n"))
	if err != nil {
		t.Fatal(err)
	}
	if want := "/" + strings.Repeat("d ", 20000); len(ms) != 1 || ms[0].MountPoint != want {
		t.Errorf("got %d mounts, mount point of %d bytes; want 1 of %d", len(ms), len(ms[0].MountPoint), len(want))
	}
}

func TestUnescape(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`/a/b`, "/a/b"},
		{`/pod\040dir/v`, "/pod dir/v"},
		{`/t\011ab\012nl`, "/t\tab\nnl"},
		{`/back\134slash`, `/back\slash`},
		{`\040lead`, " lead"},
		{`trail\040`, "trail "},
		{`/trailing\04`, `/trailing\04`},
		{`/not\999octal`, `/not\999octal`},
		{`/too\400big`, `/too\400big`},
		{`/lone\`, `/lone\`},
	} {
		if got := unescape(tc.in); got != tc.want {
			t.Errorf("unescape(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestMountPointsUnder(t *testing.T) {
	ms := []Mount{
		{MountPoint: "/"},
		{MountPoint: "/a/b"},
		{MountPoint: "/a/b/c"},
		{MountPoint: "/a/bc"},
		{MountPoint: "/a/b/c/d"},
	}
	for _, tc := range []struct {
		dir  string
		want []string
	}{
		{"/a/b", []string{"/a/b/c", "/a/b/c/d"}},
		{"/a/b/", []string{"/a/b/c", "/a/b/c/d"}},
		{"/a/b/c/d", nil},
		{"/a", []string{"/a/b", "/a/b/c", "/a/bc", "/a/b/c/d"}},
		{"/", []string{"/a/b", "/a/b/c", "/a/bc", "/a/b/c/d"}},
		{"/x", nil},
	} {
		if got := MountPointsUnder(ms, tc.dir); !slices.Equal(got, tc.want) {
			t.Errorf("MountPointsUnder(%q) = %q, want %q", tc.dir, got, tc.want)
		}
	}
}

// Read parses this process's real mount table.
func TestRead(t *testing.T) {
	ms, err := Read()
	if err != nil {
		t.Fatal(err)
	}
	var root, proc bool
	for _, m := range ms {
		root = root || m.MountPoint == "/"
		proc = proc || (m.MountPoint == "/proc" && m.FSType == "proc")
	}
	if !root || !proc {
		t.Errorf("mount table without / (%v) or /proc of type proc (%v): %+v", root, proc, ms)
	}
}

// A real mount at a path with a space and a tab comes back unescaped, and
// unmounting that path works.
func TestReadEscapedMountPoint(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting needs root")
	}
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	mp := filepath.Join(dir, "a b\tc")
	if err := os.Mkdir(mp, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("mi test", mp, "tmpfs", 0, "size=4k"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unix.Unmount(mp, unix.MNT_DETACH) })

	ms, err := Read()
	if err != nil {
		t.Fatal(err)
	}
	if got := MountPointsUnder(ms, dir); !slices.Equal(got, []string{mp}) {
		t.Fatalf("MountPointsUnder(%q) = %q, want %q", dir, got, []string{mp})
	}
	i := slices.IndexFunc(ms, func(m Mount) bool { return m.MountPoint == mp })
	if m := ms[i]; m.FSType != "tmpfs" || m.Source != "mi test" || m.Root != "/" {
		t.Errorf("got %+v, want a tmpfs from %q at /", m, "mi test")
	}
	if err := unix.Unmount(ms[i].MountPoint, 0); err != nil {
		t.Errorf("unmount the parsed mount point: %v", err)
	}
}

func TestPropagationAndContaining(t *testing.T) {
	table := "1 0 8:1 / / rw shared:1 - ext4 /dev/sda1 rw\n" +
		"2 1 0:5 / /var/lib/kubelet rw shared:7 master:1 - ext4 /dev/sda1 rw\n" +
		"3 2 0:6 / /var/lib/kubelet/pods/x/volumes/v rw - tmpfs tmpfs rw\n" +
		"4 1 0:7 / /mnt rw master:3 - tmpfs tmpfs rw\n" +
		"5 1 0:8 / /var/lib/kubeletx rw - tmpfs tmpfs rw\n" +
		// Listed before its parent (as /proc often is), and stacked.
		"6 8 0:9 / /srv/a rw - tmpfs tmpfs rw\n" +
		"8 1 0:9 / /srv rw - tmpfs tmpfs rw\n" +
		"9 6 0:10 / /srv/a rw shared:9 - tmpfs tmpfs rw\n"
	ms, err := Parse(strings.NewReader(table))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		path          string
		wantMount     string
		shared, slave bool
	}{
		{"/", "/", true, false},
		{"/etc", "/", true, false},
		{"/var/lib/kubelet", "/var/lib/kubelet", true, true},
		{"/var/lib/kubelet/plugins/csi", "/var/lib/kubelet", true, true},
		{"/var/lib/kubelet/pods/x/volumes/v/sub", "/var/lib/kubelet/pods/x/volumes/v", false, false},
		{"/var/lib/kubeletx/a", "/var/lib/kubeletx", false, false}, // a prefix of the name is not a parent
		{"/var/lib/kubele", "/", true, false},
		{"/mnt/a", "/mnt", false, true},
		{"/srv/a/b", "/srv/a", true, false},
		{"/srv/b", "/srv", false, false},
	} {
		m, ok := Containing(ms, tc.path)
		if !ok || m.MountPoint != tc.wantMount || m.Shared() != tc.shared || m.Slave() != tc.slave {
			t.Errorf("Containing(%q) = %q (ok %v, shared %v, slave %v); want %q (shared %v, slave %v)",
				tc.path, m.MountPoint, ok, m.Shared(), m.Slave(), tc.wantMount, tc.shared, tc.slave)
		}
	}
	if _, ok := Containing(ms[1:2], "/etc"); ok {
		t.Error("Containing found a mount for a path outside every mount of the table")
	}
}
