package volume

import (
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	utilptr "k8s.io/utils/ptr"

	"github.com/nodeagent/nodeagent/internal/mountinfo"
	"github.com/nodeagent/nodeagent/runtime"
)

func needRootForVolumes(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount tmpfs")
	}
}

func volPod(vols ...v1.Volume) *v1.Pod {
	return &v1.Pod{Spec: v1.PodSpec{Volumes: vols}}
}

func emptyDirVol(name string, medium v1.StorageMedium, size string) v1.Volume {
	ed := &v1.EmptyDirVolumeSource{Medium: medium}
	if size != "" {
		q := resource.MustParse(size)
		ed.SizeLimit = &q
	}
	return v1.Volume{Name: name, VolumeSource: v1.VolumeSource{EmptyDir: ed}}
}

func hostPathVol(name, path string, typ v1.HostPathType) v1.Volume {
	hp := &v1.HostPathVolumeSource{Path: path}
	if typ != "" {
		hp.Type = &typ
	}
	return v1.Volume{Name: name, VolumeSource: v1.VolumeSource{HostPath: hp}}
}

func statfs(t *testing.T, path string) unix.Statfs_t {
	t.Helper()
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		t.Fatal(err)
	}
	return st
}

func mountCount(t *testing.T, path string) int {
	t.Helper()
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		t.Fatal(err)
	}
	mps, err := readMountPoints()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, mp := range mps {
		if mp == real {
			n++
		}
	}
	return n
}

func TestVolumesEmptyDirLifecycle(t *testing.T) {
	needRootForVolumes(t)
	// A space in the path exercises mountinfo's escapes.
	podDir := filepath.Join(t.TempDir(), "pod dir")
	t.Cleanup(func() { _ = TeardownVolumes(podDir) })
	hostFile := filepath.Join(t.TempDir(), "host.txt")
	pod := volPod(
		emptyDirVol("disk", "", "1Gi"),
		emptyDirVol("mem", v1.StorageMediumMemory, "8Mi"),
		emptyDirVol("mem-nolimit", v1.StorageMediumMemory, ""),
		hostPathVol("host", hostFile, v1.HostPathFileOrCreate),
	)
	vols, err := SetupVolumes(podDir, pod)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"disk":        filepath.Join(podDir, "volumes", "empty-dir", "disk"),
		"mem":         filepath.Join(podDir, "volumes", "empty-dir", "mem"),
		"mem-nolimit": filepath.Join(podDir, "volumes", "empty-dir", "mem-nolimit"),
		"host":        hostFile,
	}
	if len(vols) != len(want) {
		t.Fatalf("SetupVolumes = %v, want %v", vols, want)
	}
	for k, v := range want {
		if vols[k] != v {
			t.Fatalf("SetupVolumes[%q] = %q, want %q", k, vols[k], v)
		}
	}
	for _, name := range []string{"disk", "mem", "mem-nolimit"} {
		fi, err := os.Stat(vols[name])
		if err != nil {
			t.Fatal(err)
		}
		if !fi.IsDir() || fi.Mode().Perm() != 0o777 {
			t.Fatalf("emptyDir %s: mode %s, want a directory with 0777", name, fi.Mode())
		}
	}
	if n := mountCount(t, vols["disk"]); n != 0 {
		t.Fatalf("disk emptyDir is a mount point (%d mounts)", n)
	}
	for _, name := range []string{"mem", "mem-nolimit"} {
		if st := statfs(t, vols[name]); st.Type != unix.TMPFS_MAGIC || mountCount(t, vols[name]) != 1 {
			t.Fatalf("emptyDir %s: not one tmpfs mount (fs type %#x)", name, st.Type)
		}
	}
	// As kubelet: memory-backed volumes are kept out of swap where the
	// kernel can (tmpfs noswap, 6.4 and later).
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		t.Fatal(err)
	}
	if kernelAtLeast(unix.ByteSliceToString(u.Release[:]), 6, 4) && !inUserNS() {
		ms, err := mountinfo.Read()
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{"mem", "mem-nolimit"} {
			real, _ := filepath.EvalSymlinks(vols[name])
			m, ok := mountinfo.Containing(ms, real)
			if !ok || m.MountPoint != real || !slices.Contains(strings.Split(m.SuperOptions, ","), "noswap") {
				t.Errorf("emptyDir %s: tmpfs options %q (mount %q), want noswap on kernel %s", name, m.SuperOptions, m.MountPoint, unix.ByteSliceToString(u.Release[:]))
			}
		}
	}
	if st := statfs(t, vols["mem"]); st.Blocks*uint64(st.Bsize) != 8<<20 {
		t.Fatalf("tmpfs size %d bytes, want sizeLimit 8Mi", st.Blocks*uint64(st.Bsize))
	}
	if st := statfs(t, vols["mem-nolimit"]); st.Blocks*uint64(st.Bsize) == 8<<20 {
		t.Fatal("tmpfs without sizeLimit got the other volume's size")
	}

	// Idempotent: nothing is mounted twice, data stays.
	for _, name := range []string{"disk", "mem"} {
		if err := os.WriteFile(filepath.Join(vols[name], "data"), []byte(name), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := SetupVolumes(podDir, pod); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"disk", "mem"} {
		if b, err := os.ReadFile(filepath.Join(vols[name], "data")); err != nil || string(b) != name {
			t.Fatalf("data of %s after a second setup: %q, %v", name, b, err)
		}
	}
	if n := mountCount(t, vols["mem"]); n != 1 {
		t.Fatalf("%d mounts at the Memory emptyDir after a second setup, want 1", n)
	}

	// A tmpfs lost (reboot, manual unmount) is mounted again.
	if err := unix.Unmount(vols["mem"], 0); err != nil {
		t.Fatal(err)
	}
	if _, err := SetupVolumes(podDir, pod); err != nil {
		t.Fatal(err)
	}
	if st := statfs(t, vols["mem"]); st.Type != unix.TMPFS_MAGIC || st.Blocks*uint64(st.Bsize) != 8<<20 {
		t.Fatalf("Memory emptyDir not re-mounted: fs type %#x", st.Type)
	}

	if err := TeardownVolumes(podDir); err != nil {
		t.Fatal(err)
	}
	if mps, err := mountsUnder(podDir); err != nil || len(mps) != 0 {
		t.Fatalf("mounts under the pod dir after teardown: %v, %v", mps, err)
	}
	if _, err := os.Stat(filepath.Join(podDir, "volumes")); !os.IsNotExist(err) {
		t.Fatalf("volumes dir after teardown: %v", err)
	}
	if _, err := os.Stat(hostFile); err != nil {
		t.Fatalf("teardown touched a hostPath volume: %v", err)
	}
	if err := TeardownVolumes(podDir); err != nil {
		t.Fatalf("second teardown: %v", err)
	}
	if err := TeardownVolumes(filepath.Join(t.TempDir(), "never-set-up")); err != nil {
		t.Fatalf("teardown of a pod without volumes: %v", err)
	}
}

func TestVolumesHostPathTypes(t *testing.T) {
	needRootForVolumes(t)
	base := t.TempDir()
	dir := filepath.Join(base, "dir")
	file := filepath.Join(base, "file")
	sock := filepath.Join(base, "sock")
	blk := filepath.Join(base, "blk")
	link := filepath.Join(base, "link-to-dir")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(dir, link); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if err := unix.Mknod(blk, unix.S_IFBLK|0o600, int(unix.Mkdev(7, 200))); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(base, "missing")

	for _, tc := range []struct {
		desc    string
		path    string
		typ     v1.HostPathType
		wantErr string // "" for success
	}{
		{"unset type, missing path", missing, "", ""},
		{"Directory", dir, v1.HostPathDirectory, ""},
		{"Directory through a symlink", link, v1.HostPathDirectory, ""},
		{"Directory on a file", file, v1.HostPathDirectory, "is not a directory"},
		{"Directory missing", missing, v1.HostPathDirectory, "no such file"},
		{"File", file, v1.HostPathFile, ""},
		{"File on a directory", dir, v1.HostPathFile, "is not a regular file"},
		{"Socket", sock, v1.HostPathSocket, ""},
		{"Socket on a file", file, v1.HostPathSocket, "is not a socket"},
		{"CharDevice", "/dev/null", v1.HostPathCharDev, ""},
		{"CharDevice on a block device", blk, v1.HostPathCharDev, "is not a character device"},
		{"BlockDevice", blk, v1.HostPathBlockDev, ""},
		{"BlockDevice on a char device", "/dev/null", v1.HostPathBlockDev, "is not a block device"},
		{"DirectoryOrCreate existing", dir, v1.HostPathDirectoryOrCreate, ""},
		{"DirectoryOrCreate on a file", file, v1.HostPathDirectoryOrCreate, "not a directory"},
		{"FileOrCreate existing", file, v1.HostPathFileOrCreate, ""},
		{"FileOrCreate on a directory", dir, v1.HostPathFileOrCreate, "is not a regular file"},
		{"FileOrCreate on a socket", sock, v1.HostPathFileOrCreate, "is not a regular file"},
		{"unknown type", dir, "Dir", `unknown type "Dir"`},
		{"relative path", "rel/dir", "", "must be absolute"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			vols, err := SetupVolumes(filepath.Join(base, "pod"), volPod(hostPathVol("hp", tc.path, tc.typ)))
			if tc.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				if vols["hp"] != tc.path {
					t.Fatalf("host path %q, want %q", vols["hp"], tc.path)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), `volume "hp"`) || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("SetupVolumes = %v, want an error naming the volume and saying %q", err, tc.wantErr)
			}
		})
	}
	if fi, err := os.Stat(file); err != nil || fi.Size() != 1 {
		t.Fatalf("FileOrCreate changed an existing file: %v, %v", fi, err)
	}

	// The *OrCreate types create what is missing, with kubelet's modes.
	newDir := filepath.Join(base, "new", "a", "b")
	newFile := filepath.Join(base, "newparent", "c", "f")
	if _, err := SetupVolumes(filepath.Join(base, "pod"), volPod(
		hostPathVol("d", newDir, v1.HostPathDirectoryOrCreate),
		hostPathVol("f", newFile, v1.HostPathFileOrCreate),
	)); err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]os.FileMode{newDir: os.ModeDir | 0o755, filepath.Dir(newFile): os.ModeDir | 0o755, newFile: 0o644} {
		fi, err := os.Stat(p)
		if err != nil || fi.Mode() != want {
			t.Fatalf("%s: mode %v (err %v), want %v", p, fi.Mode(), err, want)
		}
	}
}

func TestVolumesBadInput(t *testing.T) {
	base := t.TempDir()
	nfs := v1.Volume{Name: "cfg", VolumeSource: v1.VolumeSource{NFS: &v1.NFSVolumeSource{}}}
	both := emptyDirVol("both", "", "")
	both.HostPath = &v1.HostPathVolumeSource{Path: "/tmp"}
	for _, tc := range []struct {
		desc, podDir string
		vols         []v1.Volume
		want         string
	}{
		{"relative pod dir", "pods/x", nil, "must be absolute"},
		{"nfs", base, []v1.Volume{nfs}, `MountVolume.SetUp failed for volume "cfg" : unsupported volume source`},
		{"two sources", base, []v1.Volume{both}, `volume "both" : more than one volume source`},
		{"hugepages without a hugepages request", base, []v1.Volume{emptyDirVol("hp", v1.StorageMediumHugePages, "")}, `volume "hp" : emptyDir: medium HugePages: hugePages storage requested, but there is no resource request for huge pages`},
		{"unknown medium", base, []v1.Volume{emptyDirVol("tm", "Tmpfs", "")}, `volume "tm" : emptyDir: unsupported medium "Tmpfs"`},
		{"bad name", base, []v1.Volume{emptyDirVol("../up", "", "")}, `volume "../up": invalid name`},
		{"duplicate", base, []v1.Volume{emptyDirVol("a", "", ""), emptyDirVol("a", "", "")}, `volume "a": duplicate name`},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			_, err := SetupVolumes(tc.podDir, volPod(tc.vols...))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("SetupVolumes = %v, want an error containing %q", err, tc.want)
			}
		})
	}
	if err := TeardownVolumes("rel"); err == nil {
		t.Error("TeardownVolumes accepted a relative path")
	}
}

func TestVolumesContainerMounts(t *testing.T) {
	vols := map[string]string{"data": "/var/lib/pod/volumes/empty-dir/data", "host": "/etc/ssl"}
	none := v1.MountPropagationNone
	bidi := v1.MountPropagationBidirectional
	h2c := v1.MountPropagationHostToContainer
	bogus := v1.MountPropagationMode("Sideways")
	rroEnabled := v1.RecursiveReadOnlyEnabled
	for _, tc := range []struct {
		desc       string
		mounts     []v1.VolumeMount
		privileged *bool
		want       []runtime.Mount
		wantErr    string
	}{
		{desc: "none", want: []runtime.Mount{}},
		{
			desc: "read-write and read-only",
			mounts: []v1.VolumeMount{
				{Name: "data", MountPath: "/data"},
				{Name: "host", MountPath: "/etc/ssl", ReadOnly: true, MountPropagation: &none},
				{Name: "data", MountPath: "/again"},
			},
			want: []runtime.Mount{
				{HostPath: vols["data"], ContainerPath: "/data"},
				{HostPath: "/etc/ssl", ContainerPath: "/etc/ssl", ReadOnly: true},
				{HostPath: vols["data"], ContainerPath: "/again"},
			},
		},
		{desc: "unknown volume", mounts: []v1.VolumeMount{{Name: "nope", MountPath: "/x"}}, wantErr: `container "c": volumeMount "nope" at "/x": no volume named "nope"`},
		{desc: "relative", mounts: []v1.VolumeMount{{Name: "data", MountPath: "x"}}, wantErr: "mountPath must be absolute"},
		{desc: "duplicate", mounts: []v1.VolumeMount{{Name: "data", MountPath: "/x"}, {Name: "host", MountPath: "/x/"}}, wantErr: "duplicate mountPath"},
		{desc: "subPath", mounts: []v1.VolumeMount{{Name: "data", MountPath: "/x", SubPath: "a"}}, wantErr: "subPath"},
		{
			desc:   "propagation: HostToContainer in any container",
			mounts: []v1.VolumeMount{{Name: "host", MountPath: "/h", ReadOnly: true, MountPropagation: &h2c}, {Name: "data", MountPath: "/d", MountPropagation: &none}},
			want: []runtime.Mount{
				{HostPath: "/etc/ssl", ContainerPath: "/h", ReadOnly: true, Propagation: runtime.PropagationHostToContainer},
				{HostPath: vols["data"], ContainerPath: "/d"},
			},
		},
		{
			desc:       "propagation: Bidirectional in a privileged container",
			mounts:     []v1.VolumeMount{{Name: "host", MountPath: "/h", MountPropagation: &bidi}},
			privileged: utilptr.To(true),
			want:       []runtime.Mount{{HostPath: "/etc/ssl", ContainerPath: "/h", Propagation: runtime.PropagationBidirectional}},
		},
		{
			desc:    "propagation: Bidirectional without a securityContext",
			mounts:  []v1.VolumeMount{{Name: "data", MountPath: "/x", MountPropagation: &bidi}},
			wantErr: `container "c": volumeMount "data" at "/x": Bidirectional mount propagation is available only to privileged containers`,
		},
		{
			desc:       "propagation: Bidirectional with privileged false",
			mounts:     []v1.VolumeMount{{Name: "data", MountPath: "/x", MountPropagation: &bidi}},
			privileged: utilptr.To(false),
			wantErr:    "Bidirectional mount propagation is available only to privileged containers",
		},
		{desc: "propagation: unknown mode", mounts: []v1.VolumeMount{{Name: "data", MountPath: "/x", MountPropagation: &bogus}}, wantErr: `invalid MountPropagation mode: "Sideways"`},
		{desc: "recursiveReadOnly", mounts: []v1.VolumeMount{{Name: "data", MountPath: "/x", ReadOnly: true, RecursiveReadOnly: &rroEnabled}}, wantErr: "recursiveReadOnly Enabled"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			c := &v1.Container{Name: "c", VolumeMounts: tc.mounts}
			if tc.privileged != nil {
				c.SecurityContext = &v1.SecurityContext{Privileged: tc.privileged}
			}
			got, err := ContainerMounts(c, vols)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("ContainerMounts = %v, %v; want an error containing %q", got, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("ContainerMounts = %+v, want %+v", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Fatalf("ContainerMounts[%d] = %+v, want %+v", i, got[i], tc.want[i])
				}
			}
		})
	}
}

// emptyDir with fsGroup, as kubelet lays it out: the group and setgid on
// the directory (2777 on disk; 3777 on tmpfs, whose root is 1777), group
// read-write on what is inside; once — a later change by the pod stays.
func TestVolumesEmptyDirFSGroup(t *testing.T) {
	needRootForVolumes(t)
	podDir := filepath.Join(t.TempDir(), "pod")
	t.Cleanup(func() { _ = TeardownVolumes(podDir) })
	pod := volPod(emptyDirVol("disk", "", ""), emptyDirVol("mem", v1.StorageMediumMemory, "1Mi"))
	plain := volPod(emptyDirVol("plain-mem", v1.StorageMediumMemory, "1Mi"))
	pod.Spec.SecurityContext = &v1.PodSecurityContext{FSGroup: utilptr.To[int64](2345)}
	// Content from before the first setup (kubelet walks it too).
	disk := filepath.Join(podDir, "volumes", "empty-dir", "disk")
	if err := os.MkdirAll(filepath.Join(disk, "sub"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(disk, "sub", "f"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc/hostname", filepath.Join(disk, "link")); err != nil {
		t.Fatal(err)
	}
	vols, err := SetupVolumes(podDir, pod)
	if err != nil {
		t.Fatal(err)
	}
	pvols, err := SetupVolumes(podDir, plain)
	if err != nil {
		t.Fatal(err)
	}
	stat := func(p string) (fs.FileMode, uint32) {
		t.Helper()
		fi, err := os.Lstat(p)
		if err != nil {
			t.Fatal(err)
		}
		return fi.Mode(), fi.Sys().(*syscall.Stat_t).Gid
	}
	etcMode, _ := stat("/etc/hostname")
	for _, tc := range []struct {
		path     string
		wantMode fs.FileMode
		wantGid  uint32
	}{
		{vols["disk"], fs.ModeDir | fs.ModeSetgid | 0o777, 2345},
		{vols["mem"], fs.ModeDir | fs.ModeSetgid | fs.ModeSticky | 0o777, 2345},
		{pvols["plain-mem"], fs.ModeDir | fs.ModeSticky | 0o777, 0},
		{filepath.Join(disk, "sub"), fs.ModeDir | fs.ModeSetgid | 0o770, 2345},
		{filepath.Join(disk, "sub", "f"), 0o660, 2345},
	} {
		if mode, gid := stat(tc.path); mode != tc.wantMode || gid != tc.wantGid {
			t.Errorf("%s: mode %v gid %d, want %v gid %d", tc.path, mode, gid, tc.wantMode, tc.wantGid)
		}
	}
	// The symlink's target is not touched.
	if mode, _ := stat("/etc/hostname"); mode != etcMode {
		t.Errorf("/etc/hostname mode changed to %v through the symlink", mode)
	}
	if _, err := os.Stat(filepath.Join(podDir, "plugins", "kubernetes.io~empty-dir", "disk", "ready")); err != nil {
		t.Errorf("no ready file: %v", err)
	}
	// A file the pod makes inherits the group.
	if err := os.WriteFile(filepath.Join(vols["mem"], "new"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, gid := stat(filepath.Join(vols["mem"], "new")); gid != 2345 {
		t.Errorf("a new file in the tmpfs emptyDir has gid %d, want 2345", gid)
	}
	// Set up once: the pod's own chmod survives the next sync.
	if err := os.Chmod(vols["disk"], 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := SetupVolumes(podDir, pod); err != nil {
		t.Fatal(err)
	}
	if mode, _ := stat(vols["disk"]); mode != fs.ModeDir|0o700 {
		t.Errorf("a second setup changed the emptyDir's mode to %v", mode)
	}
	// A tmpfs mounted but not marked ready (an agent killed in between, or
	// a pod from an agent before the ready file) keeps its sticky bit.
	if err := os.Remove(filepath.Join(podDir, "plugins", "kubernetes.io~empty-dir", "plain-mem", "ready")); err != nil {
		t.Fatal(err)
	}
	if _, err := SetupVolumes(podDir, plain); err != nil {
		t.Fatal(err)
	}
	if mode, _ := stat(pvols["plain-mem"]); mode != fs.ModeDir|fs.ModeSticky|0o777 || mountCount(t, pvols["plain-mem"]) != 1 {
		t.Errorf("tmpfs set up again without its ready file: mode %v, %d mounts", mode, mountCount(t, pvols["plain-mem"]))
	}
	// A tmpfs that went away (a reboot) is mounted and owned again.
	if err := unix.Unmount(vols["mem"], 0); err != nil {
		t.Fatal(err)
	}
	if _, err := SetupVolumes(podDir, pod); err != nil {
		t.Fatal(err)
	}
	if mode, gid := stat(vols["mem"]); mode != fs.ModeDir|fs.ModeSetgid|fs.ModeSticky|0o777 || gid != 2345 || mountCount(t, vols["mem"]) != 1 {
		t.Errorf("re-mounted tmpfs: mode %v gid %d mounts %d", mode, gid, mountCount(t, vols["mem"]))
	}
}

func TestKernelAtLeast(t *testing.T) {
	for _, tc := range []struct {
		release string
		want    bool
	}{
		{"6.18.44-fc-v782", true}, {"6.4.0", true}, {"6.3.13-amd64", false}, {"6.1.0-50-amd64", false},
		{"7.0", true}, {"5.19.17", false}, {"6.4-rc1", true}, {"garbage", false},
	} {
		if got := kernelAtLeast(tc.release, 6, 4); got != tc.want {
			t.Errorf("kernelAtLeast(%q, 6, 4) = %v, want %v", tc.release, got, tc.want)
		}
	}
}
