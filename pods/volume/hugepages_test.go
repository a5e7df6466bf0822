package volume

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// hugePod is a pod whose containers request the given hugepages-<size>
// (one container each) and whose init container requests initSize.
func hugePod(initSize string, sizes ...string) *v1.Pod {
	p := &v1.Pod{}
	ctr := func(size string) v1.Container {
		rl := v1.ResourceList{v1.ResourceMemory: resource.MustParse("8Mi"), v1.ResourceName("hugepages-" + size): resource.MustParse("4" + strings.TrimLeft(size, "0123456789"))}
		return v1.Container{Name: "c" + size, Resources: v1.ResourceRequirements{Requests: rl, Limits: rl}}
	}
	for _, s := range sizes {
		p.Spec.Containers = append(p.Spec.Containers, ctr(s))
	}
	if initSize != "" {
		p.Spec.InitContainers = []v1.Container{ctr(initSize)}
	}
	return p
}

func TestHugePagesMountOption(t *testing.T) {
	for _, tc := range []struct {
		desc    string
		medium  v1.StorageMedium
		pod     *v1.Pod
		want    string
		wantErr string
	}{
		{"HugePages: the one size requested", v1.StorageMediumHugePages, hugePod("", "2Mi"), "pagesize=2Mi", ""},
		{"HugePages: an init container's size counts", v1.StorageMediumHugePages, hugePod("1Gi"), "pagesize=1Gi", ""},
		{"HugePages: the same size twice", v1.StorageMediumHugePages, hugePod("2Mi", "2Mi"), "pagesize=2Mi", ""},
		{"HugePages: two sizes", v1.StorageMediumHugePages, hugePod("", "2Mi", "1Gi"), "", "medium: HugePages can't be used if container requests multiple huge page sizes"},
		{"HugePages-<size> among two sizes", "HugePages-1Gi", hugePod("", "2Mi", "1Gi"), "pagesize=1Gi", ""},
		{"HugePages-<size> not requested", "HugePages-1Gi", hugePod("", "2Mi"), "", "medium HugePages-1Gi: hugePages storage requested, but there is no resource request for huge pages"},
		{"HugePages without requests", v1.StorageMediumHugePages, &v1.Pod{}, "", "medium HugePages: hugePages storage requested, but there is no resource request for huge pages"},
		{"HugePages-<size> that does not parse", "HugePages-x", hugePod("", "2Mi"), "", `medium HugePages-x: invalid huge page size "x"`},
	} {
		got, err := hugePagesMountOption(tc.medium, tc.pod)
		if tc.wantErr != "" {
			if err == nil || err.Error() != tc.wantErr {
				t.Errorf("%s: %q, %v; want error %q", tc.desc, got, err, tc.wantErr)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%s: %q, %v; want %q", tc.desc, got, err, tc.want)
		}
	}
}

// reserveHugePages sets the host's pool of 2Mi pages to n for the test
// and restores it after; it skips when the kernel has no 2Mi pages and
// fails when the pool cannot grow to n (memory too fragmented).
func reserveHugePages(t *testing.T, n int) {
	t.Helper()
	p := "/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages"
	old, err := os.ReadFile(p)
	if os.IsNotExist(err) {
		t.Skip("this kernel has no 2Mi huge pages")
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := os.WriteFile(p, old, 0o644); err != nil {
			t.Errorf("restoring %s to %s: %v", p, strings.TrimSpace(string(old)), err)
		}
	})
	if err := os.WriteFile(p, []byte(strconv.Itoa(n)), 0o644); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(p)
	if strings.TrimSpace(string(b)) != strconv.Itoa(n) {
		t.Fatalf("%s is %s after writing %d: the kernel could not reserve the pages", p, strings.TrimSpace(string(b)), n)
	}
}

// An emptyDir with medium HugePages and one with HugePages-2Mi are
// hugetlbfs mounts of 2Mi pages, on the host's real kernel: a file there
// takes whole huge pages out of the reserved pool, the mount is set up
// once (idempotent) and goes with TeardownVolumes.
func TestVolumesEmptyDirHugePages(t *testing.T) {
	needRootForVolumes(t)
	reserveHugePages(t, 2)
	podDir := filepath.Join(t.TempDir(), "pod")
	t.Cleanup(func() { _ = TeardownVolumes(podDir) })
	pod := hugePod("", "2Mi")
	pod.Spec.Volumes = []v1.Volume{emptyDirVol("huge", v1.StorageMediumHugePages, ""), emptyDirVol("huge-2mi", "HugePages-2Mi", "")}
	vols, err := SetupVolumes(podDir, pod)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"huge", "huge-2mi"} {
		st := statfs(t, vols[name])
		if st.Type != unix.HUGETLBFS_MAGIC || st.Bsize != 2<<20 || mountCount(t, vols[name]) != 1 {
			t.Fatalf("emptyDir %s: fs type %#x block size %d, %d mounts; want one hugetlbfs of 2Mi pages", name, st.Type, st.Bsize, mountCount(t, vols[name]))
		}
	}
	// A huge page taken from the pool (hugetlbfs files are allocated,
	// not written).
	f, err := os.Create(filepath.Join(vols["huge"], "page"))
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Fallocate(int(f.Fd()), 0, 0, 2<<20); err != nil {
		f.Close()
		t.Fatalf("fallocate of one huge page: %v", err)
	}
	f.Close()
	free, _ := os.ReadFile("/sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages")
	if strings.TrimSpace(string(free)) != "1" {
		t.Errorf("free 2Mi pages %s after taking one of 2", strings.TrimSpace(string(free)))
	}
	if _, err := SetupVolumes(podDir, pod); err != nil {
		t.Fatal(err)
	}
	if n := mountCount(t, vols["huge"]); n != 1 {
		t.Fatalf("after a second SetupVolumes: %d mounts", n)
	}
	if _, err := os.Stat(filepath.Join(vols["huge"], "page")); err != nil {
		t.Fatalf("the page's file is gone after a second SetupVolumes: %v", err)
	}
	if err := TeardownVolumes(podDir); err != nil {
		t.Fatal(err)
	}
	mps, err := readMountPoints()
	if err != nil {
		t.Fatal(err)
	}
	for _, mp := range mps {
		if strings.HasPrefix(mp, podDir+"/") {
			t.Errorf("after TeardownVolumes: %s is still mounted", mp)
		}
	}
}
