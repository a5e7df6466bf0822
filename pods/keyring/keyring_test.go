package keyring

import (
	"encoding/base64"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	testingclock "k8s.io/utils/clock/testing"
)

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

func TestLookup(t *testing.T) {
	var k Keyring
	k.Add("a", Config{
		"https://index.docker.io/v1/":   {Username: "hub", Password: "h"},
		"registry.example.com":          {Username: "host", Password: "1"},
		"registry.example.com/team":     {Username: "team", Password: "2"},
		"registry.example.com:5000":     {Username: "port", Password: "3"},
		"http://*.mirror.io/v2/":        {Username: "glob", Password: "4"},
		"127.0.0.1:5555/private/images": {Username: "loop", Password: "5"},
	})
	k.Add("b", Config{"registry.example.com": {Username: "host2", Password: "6"}})
	for _, tc := range []struct {
		repo string
		want []string
	}{
		{"docker.io/library/busybox", []string{"hub"}},
		{"busybox", []string{"hub"}},
		{"myuser/app", []string{"hub"}},
		{"registry.example.com/team/app", []string{"team", "host", "host2"}},
		{"registry.example.com/other/app", []string{"host", "host2"}},
		{"registry.example.com:5000/team/app", []string{"port"}},
		{"registry.example.com:5001/team/app", nil},
		{"eu.mirror.io/x", []string{"glob"}},
		{"a.eu.mirror.io/x", nil}, // a glob label matches one label
		{"127.0.0.1:5555/private/images/busybox", []string{"loop"}},
		{"127.0.0.1:5555/public/busybox", nil},
		{"quay.io/x/y", nil},
	} {
		var got []string
		for _, c := range k.Lookup(tc.repo) {
			got = append(got, c.Username)
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("Lookup(%q) = %v, want %v", tc.repo, got, tc.want)
		}
	}
	var nilRing *Keyring
	if got := nilRing.Lookup("busybox"); got != nil {
		t.Errorf("nil keyring: %v", got)
	}
}

func TestFromSecret(t *testing.T) {
	for _, tc := range []struct {
		name    string
		s       v1.Secret
		want    Config
		wantErr bool
	}{
		{
			name: "dockerconfigjson with auth",
			s: v1.Secret{Type: v1.SecretTypeDockerConfigJson, Data: map[string][]byte{
				v1.DockerConfigJsonKey: []byte(`{"auths":{"r.io":{"auth":"` + b64("u:p:w") + `"}}}`)}},
			want: Config{"r.io": {Username: "u", Password: "p:w"}},
		},
		{
			name: "dockerconfigjson with username and password, unpadded auth wins",
			s: v1.Secret{Type: v1.SecretTypeDockerConfigJson, Data: map[string][]byte{
				v1.DockerConfigJsonKey: []byte(`{"auths":{"r.io":{"username":"x","password":"y"},"s.io":{"auth":"dTpwcA"}}}`)}},
			want: Config{"r.io": {Username: "x", Password: "y"}, "s.io": {Username: "u", Password: "pp"}},
		},
		{
			name: "dockercfg",
			s: v1.Secret{Type: v1.SecretTypeDockercfg, Data: map[string][]byte{
				v1.DockerConfigKey: []byte(`{"r.io":{"username":"x","password":"y","email":"e"}}`)}},
			want: Config{"r.io": {Username: "x", Password: "y"}},
		},
		{
			name: "opaque secret ignored",
			s:    v1.Secret{Type: v1.SecretTypeOpaque, Data: map[string][]byte{v1.DockerConfigJsonKey: []byte(`{}`)}},
		},
		{
			name: "type without its key ignored",
			s:    v1.Secret{Type: v1.SecretTypeDockerConfigJson, Data: map[string][]byte{v1.DockerConfigKey: []byte(`{}`)}},
		},
		{
			name:    "bad json",
			s:       v1.Secret{Type: v1.SecretTypeDockerConfigJson, Data: map[string][]byte{v1.DockerConfigJsonKey: []byte(`{`)}},
			wantErr: true,
		},
		{
			name: "auth without colon",
			s: v1.Secret{Type: v1.SecretTypeDockerConfigJson, Data: map[string][]byte{
				v1.DockerConfigJsonKey: []byte(`{"auths":{"r.io":{"auth":"` + b64("nocolon") + `"}}}`)}},
			wantErr: true,
		},
	} {
		got, err := FromSecret(&tc.s)
		if (err != nil) != tc.wantErr || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: FromSecret = %v, %v; want %v (error %v)", tc.name, got, err, tc.want, tc.wantErr)
		}
	}
}

func TestNodePaths(t *testing.T) {
	got := NodePaths("/var/lib/nodeagent", "/root")
	want := []string{
		"/var/lib/nodeagent/config.json", "/root/.docker/config.json", "/.docker/config.json",
		"/var/lib/nodeagent/.dockercfg", "/root/.dockercfg", "/.dockercfg",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("NodePaths = %v, want %v", got, want)
	}
	got = NodePaths("/var/lib/nodeagent", "")
	want = []string{"/var/lib/nodeagent/config.json", "/.docker/config.json", "/var/lib/nodeagent/.dockercfg", "/.dockercfg"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("NodePaths without home = %v, want %v", got, want)
	}
}

// The first usable file wins (a broken one is skipped), and changes are
// seen after 5 minutes, not before.
func TestNode(t *testing.T) {
	dir := t.TempDir()
	root, home := filepath.Join(dir, "root"), filepath.Join(dir, "home")
	for _, d := range []string{root, filepath.Join(home, ".docker")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write := func(p, s string) {
		t.Helper()
		if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(root, "config.json"), `{not json`)
	write(filepath.Join(home, ".docker", "config.json"), `{"auths":{"r.io":{"auth":"`+b64("home:1")+`"}}}`)
	write(filepath.Join(root, ".dockercfg"), `{"r.io":{"username":"cfg","password":"2"}}`)
	clk := testingclock.NewFakeClock(time.Unix(1000, 0))
	n := &Node{Paths: NodePaths(root, home), Clock: clk}
	users := func() []string {
		var out []string
		for _, c := range n.Keyring().Lookup("r.io/app") {
			out = append(out, c.Username+"@"+filepath.Base(filepath.Dir(c.Source)))
		}
		return out
	}
	if got := users(); !reflect.DeepEqual(got, []string{"home@.docker"}) {
		t.Fatalf("node credentials = %v, want the home config.json's alone", got)
	}
	write(filepath.Join(root, "config.json"), `{"auths":{"r.io":{"username":"root","password":"3"}}}`)
	clk.Step(4 * time.Minute)
	if got := users(); !reflect.DeepEqual(got, []string{"home@.docker"}) {
		t.Fatalf("re-read before 5m: %v", got)
	}
	clk.Step(time.Minute)
	if got := users(); !reflect.DeepEqual(got, []string{"root@root"}) {
		t.Fatalf("after 5m = %v, want the root dir's config.json", got)
	}
}
