package testimage

import (
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// RegistryOptions change how a Registry serves.
type RegistryOptions struct {
	// Users maps usernames to passwords (nil: anonymous access).
	Users map[string]string
	// BlobChunk and BlobInterval, when both set, send each blob BlobChunk
	// bytes at a time with BlobInterval between chunks: a slow registry
	// that keeps making progress.
	BlobChunk    int
	BlobInterval time.Duration
	// StallAfter, when positive, sends the first StallAfter bytes of each
	// blob larger than that and then nothing more until the client goes
	// away: a stalled download.
	StallAfter int
	// TLS serves HTTPS with a certificate for 127.0.0.1 signed by a CA of
	// the server's own (CAPEM).
	TLS bool
}

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
	// CAPEM is the certificate to trust for a TLS registry (PEM).
	CAPEM []byte

	opts         RegistryOptions
	unauthorized atomic.Int64
	served       atomic.Int64
	blobBytes    atomic.Int64
}

// BlobBytes counts the blob bytes written to clients.
func (r *Registry) BlobBytes() int64 { return r.blobBytes.Load() }

// Unauthorized counts the requests refused with 401.
func (r *Registry) Unauthorized() int64 { return r.unauthorized.Load() }

// Manifests counts the manifest requests answered (HEAD or GET).
func (r *Registry) Manifests() int64 { return r.served.Load() }

// NewRegistry starts a registry serving the test image; users may be nil
// (anonymous). The caller closes it.
func NewRegistry(users map[string]string) (*Registry, error) {
	return NewRegistryWith(RegistryOptions{Users: users})
}

// NewRegistryWith starts a registry serving the test image as opts say.
// The caller closes it.
func NewRegistryWith(opts RegistryOptions) (*Registry, error) {
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
	reg := &Registry{Users: opts.Users, opts: opts}
	reg.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
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
		isBlob := false
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
			ctype, dgst, isBlob = "application/octet-stream", d, true
		default:
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", ctype)
		w.Header().Set("Docker-Content-Digest", dgst)
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		if r.Method == http.MethodHead {
			return
		}
		if isBlob {
			reg.writeBlob(w, r, body)
			return
		}
		_, _ = w.Write(body)
	}))
	if opts.TLS {
		reg.StartTLS()
		reg.CAPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: reg.Certificate().Raw})
	} else {
		reg.Start()
	}
	reg.Host = strings.TrimPrefix(strings.TrimPrefix(reg.URL, "http://"), "https://")
	return reg, nil
}

// writeBlob sends body as the options say: at once, in timed chunks, or
// stalling after a prefix.
func (reg *Registry) writeBlob(w http.ResponseWriter, r *http.Request, body []byte) {
	o := reg.opts
	flush := func() {
		if f, ok := w.(http.Flusher); ok {
			f.Flush()
		}
	}
	if o.StallAfter > 0 && len(body) > o.StallAfter {
		n, _ := w.Write(body[:o.StallAfter])
		reg.blobBytes.Add(int64(n))
		flush()
		<-r.Context().Done()
		return
	}
	if o.BlobChunk <= 0 || o.BlobInterval <= 0 {
		n, _ := w.Write(body)
		reg.blobBytes.Add(int64(n))
		return
	}
	for off := 0; off < len(body); off += o.BlobChunk {
		if off > 0 {
			select {
			case <-r.Context().Done():
				return
			case <-time.After(o.BlobInterval):
			}
		}
		n, err := w.Write(body[off:min(off+o.BlobChunk, len(body))])
		reg.blobBytes.Add(int64(n))
		if err != nil {
			return
		}
		flush()
	}
}
