package volume

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
)

func TestPrepareSubPath(t *testing.T) {
	needRootForVolumes(t)
	tmp := t.TempDir()
	podDir := filepath.Join(tmp, "pod")
	vol := filepath.Join(tmp, "vol")
	outside := filepath.Join(tmp, "outside")
	for _, d := range []string{vol, outside, filepath.Join(vol, "dir"), filepath.Join(vol, "real")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(vol, 0o777); err != nil {
		t.Fatal(err)
	}
	for p, data := range map[string]string{filepath.Join(vol, "file"): "in", filepath.Join(vol, "real", "f"): "real", filepath.Join(outside, "secret"): "host"} {
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for link, target := range map[string]string{
		"abs":      outside,          // absolute: resolves on the host, outside
		"up":       "../outside",     // relative, out of the volume
		"inside":   "real",           // stays inside: allowed
		"dangling": "../nowhere/new", // missing and outside
	} {
		if err := os.Symlink(target, filepath.Join(vol, link)); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		if err := TeardownVolumes(podDir); err != nil {
			t.Error(err)
		}
	})
	tests := []struct {
		sub      string
		wantFile string // a file to read through the mount, and its content
		want     string
		wantErr  string
	}{
		{sub: "file", wantFile: "", want: "in"},
		{sub: "dir"},
		{sub: "inside", wantFile: "f", want: "real"},
		{sub: "inside/f", want: "real"},
		{sub: "new/deeper"},
		{sub: "abs", wantErr: "not within volume path"},
		{sub: "abs/secret", wantErr: "not within volume path"},
		{sub: "up/secret", wantErr: "not within volume path"},
		{sub: "dangling", wantErr: "failed to create subPath directory"},
		{sub: "../outside", wantErr: "must not contain '..'"},
		{sub: "/etc", wantErr: "must not be an absolute path"},
	}
	for i, tt := range tests {
		t.Run(tt.sub, func(t *testing.T) {
			target := filepath.Join(podDir, subPathsDir, "v", "c", string(rune('0'+i)))
			host, err := PrepareSubPath(vol, tt.sub, target)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("PrepareSubPath(%q) = %q, %v; want an error containing %q", tt.sub, host, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if mounted, err := isMountPoint(host); err != nil || !mounted {
				t.Fatalf("%s is not a mount point (%v)", host, err)
			}
			if tt.want != "" {
				b, err := os.ReadFile(filepath.Join(host, tt.wantFile))
				if err != nil || string(b) != tt.want {
					t.Errorf("read through the mount = %q, %v; want %q", b, err, tt.want)
				}
			}
			if tt.sub == "new/deeper" {
				fi, err := os.Stat(filepath.Join(vol, "new", "deeper"))
				if err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o777 {
					t.Errorf("created subPath: %v, %v; want a directory 0777 (the volume's mode)", fi, err)
				}
				// Writes through the mount land in the volume.
				if err := os.WriteFile(filepath.Join(host, "w"), []byte("x"), 0o644); err != nil {
					t.Fatal(err)
				}
				if _, err := os.Stat(filepath.Join(vol, "new", "deeper", "w")); err != nil {
					t.Error(err)
				}
			}
			// Again (a restarted container): the old mount is replaced.
			if _, err := PrepareSubPath(vol, tt.sub, target); err != nil {
				t.Fatal(err)
			}
			if n := mountCount(t, target); n != 1 {
				t.Errorf("%d mounts at %s after a second prepare, want 1", n, target)
			}
		})
	}
	// Nothing was created outside the volume.
	if _, err := os.Stat(filepath.Join(tmp, "nowhere")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a subPath through a dangling symlink created %s: %v", filepath.Join(tmp, "nowhere"), err)
	}
}

func TestSafeOpenRefusesSwappedSymlink(t *testing.T) {
	tmp := t.TempDir()
	if err := os.Symlink("/etc", filepath.Join(tmp, "x")); err != nil {
		t.Fatal(err)
	}
	// As if "x" was a directory when resolved and a symlink when opened.
	if _, err := safeOpen(tmp, filepath.Join(tmp, "x", "passwd")); err == nil {
		t.Fatal("safeOpen followed a symlink")
	}
}

func TestContainerMountsWithSubPaths(t *testing.T) {
	needRootForVolumes(t)
	tmp := t.TempDir()
	podDir := filepath.Join(tmp, "pod")
	vol := filepath.Join(tmp, "vol")
	if err := os.MkdirAll(vol, 0o777); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = TeardownVolumes(podDir) })
	env := map[string]string{"POD": "web-1", "ABS": "/etc", "UP": ".."}
	expand := func(s string) (string, error) {
		if v, ok := strings.CutPrefix(s, "$("); ok {
			v = strings.TrimSuffix(v, ")")
			if env[v] == "" {
				return "", errors.New("missing value for " + v)
			}
			return env[v], nil
		}
		return s, nil
	}
	c := &v1.Container{Name: "c", VolumeMounts: []v1.VolumeMount{
		{Name: "v", MountPath: "/whole"},
		{Name: "v", MountPath: "/logs", SubPathExpr: "$(POD)"},
		{Name: "v", MountPath: "/sub", SubPath: "a/b", ReadOnly: true},
	}}
	ms, err := ContainerMountsWithSubPaths(podDir, c, map[string]string{"v": vol}, expand)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{vol, filepath.Join(podDir, subPathsDir, "v", "c", "1"), filepath.Join(podDir, subPathsDir, "v", "c", "2")}
	for i, m := range ms {
		if m.HostPath != want[i] || m.ContainerPath != c.VolumeMounts[i].MountPath || m.ReadOnly != c.VolumeMounts[i].ReadOnly {
			t.Errorf("mount %d = %+v, want host %s", i, m, want[i])
		}
	}
	if _, err := os.Stat(filepath.Join(vol, "web-1")); err != nil {
		t.Errorf("subPathExpr directory: %v", err)
	}
	for _, tt := range []struct{ expr, want string }{
		{"$(ABS)", "must not be an absolute path"},
		{"$(UP)", "must not contain '..'"},
		{"$(NOPE)", "missing value for NOPE"},
	} {
		c := &v1.Container{Name: "c", VolumeMounts: []v1.VolumeMount{{Name: "v", MountPath: "/x", SubPathExpr: tt.expr}}}
		if _, err := ContainerMountsWithSubPaths(podDir, c, map[string]string{"v": vol}, expand); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("subPathExpr %s: %v, want an error containing %q", tt.expr, err, tt.want)
		}
	}
}
