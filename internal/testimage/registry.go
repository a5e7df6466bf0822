package testimage

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
)

// Registry is a minimal registry (the pull side of the distribution API)
// over plain HTTP on 127.0.0.1, serving the test image's manifest under any
// repository, for tag "v1" or the manifest's digest, and its blobs. With
// Users set, every request needs basic auth of one of them: others get 401
// with a Basic challenge, as a registry with htpasswd auth answers.
type Registry struct {
	*httptest.Server
	// Host is "127.0.0.1:<port>", the registry part of an image reference.
	Host string
	// Users maps usernames to passwords (nil: anonymous access).
	Users map[string]string

	unauthorized atomic.Int64
	served       atomic.Int64
}

// Unauthorized counts the requests refused with 401.
func (r *Registry) Unauthorized() int64 { return r.unauthorized.Load() }

// Manifests counts the manifest requests answered (HEAD or GET).
func (r *Registry) Manifests() int64 { return r.served.Load() }

// NewRegistry starts a registry serving the test image; users may be nil
// (anonymous). The caller closes it.
func NewRegistry(users map[string]string) (*Registry, error) {
	files, err := Files()
	if err != nil {
		return nil, err
	}
	var index struct {
		Manifests []struct {
			MediaType string `json:"mediaType"`
			Digest    string `json:"digest"`
		} `json:"manifests"`
	}
	if err := json.Unmarshal(files["index.json"], &index); err != nil || len(index.Manifests) != 1 {
		return nil, fmt.Errorf("test image index: %v (%d manifests)", err, len(index.Manifests))
	}
	man := index.Manifests[0]
	blob := func(d string) ([]byte, bool) {
		b, ok := files["blobs/sha256/"+strings.TrimPrefix(d, "sha256:")]
		return b, ok && strings.HasPrefix(d, "sha256:")
	}
	reg := &Registry{Users: users}
	reg.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if reg.Users != nil {
			u, p, ok := r.BasicAuth()
			if want, known := reg.Users[u]; !ok || !known || want != p {
				reg.unauthorized.Add(1)
				w.Header().Set("WWW-Authenticate", `Basic realm="nodeagent-test"`)
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusUnauthorized)
				_, _ = w.Write([]byte(`{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}`))
				return
			}
		}
		p := r.URL.Path
		var body []byte
		var ctype, dgst string
		switch i := strings.LastIndex(p, "/manifests/"); {
		case p == "/v2/":
			w.WriteHeader(http.StatusOK)
			return
		case i > 0:
			ref := p[i+len("/manifests/"):]
			if ref != "v1" && ref != man.Digest {
				http.Error(w, `{"errors":[{"code":"MANIFEST_UNKNOWN"}]}`, http.StatusNotFound)
				return
			}
			body, _ = blob(man.Digest)
			ctype, dgst = man.MediaType, man.Digest
			reg.served.Add(1)
		case strings.Contains(p, "/blobs/"):
			d := p[strings.LastIndex(p, "/")+1:]
			var ok bool
			if body, ok = blob(d); !ok {
				http.Error(w, `{"errors":[{"code":"BLOB_UNKNOWN"}]}`, http.StatusNotFound)
				return
			}
			ctype, dgst = "application/octet-stream", d
		default:
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", ctype)
		w.Header().Set("Docker-Content-Digest", dgst)
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		if r.Method != http.MethodHead {
			_, _ = w.Write(body)
		}
	}))
	reg.Host = strings.TrimPrefix(reg.URL, "http://")
	return reg, nil
}
