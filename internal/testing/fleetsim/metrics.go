package fleetsim

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"

	"k8s.io/client-go/kubernetes"
)

// EtcdMetrics are the etcd metrics the benchmarks read: writes, bytes
// written and the database size (etcd 3.4 had both the debugging and the
// stable names, 3.6 has the stable ones; Metric reads whichever is there).
var EtcdMetrics = []string{
	"etcd_debugging_mvcc_put_total", "etcd_mvcc_put_total",
	"etcd_debugging_mvcc_total_put_size_in_bytes", "etcd_mvcc_total_put_size_in_bytes",
	"etcd_debugging_mvcc_db_total_size_in_bytes", "etcd_mvcc_db_total_size_in_bytes",
	"etcd_mvcc_db_total_size_in_use_in_bytes",
}

// Names of the figures read from EtcdMetrics, for Metric.
var (
	EtcdPuts     = []string{"etcd_debugging_mvcc_put_total", "etcd_mvcc_put_total"}
	EtcdPutBytes = []string{"etcd_debugging_mvcc_total_put_size_in_bytes", "etcd_mvcc_total_put_size_in_bytes"}
	EtcdDBSize   = []string{"etcd_mvcc_db_total_size_in_bytes", "etcd_debugging_mvcc_db_total_size_in_bytes"}
	EtcdDBInUse  = []string{"etcd_mvcc_db_total_size_in_use_in_bytes"}
)

// Metric returns the first of names present in m, else 0.
func Metric(m map[string]float64, names ...string) float64 {
	for _, n := range names {
		if v, ok := m[n]; ok {
			return v
		}
	}
	return 0
}

// Delta returns b − a for every key of b.
func Delta(a, b map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for k, v := range b {
		out[k] = v - a[k]
	}
	return out
}

// ScrapeEtcd reads EtcdMetrics from etcd's /metrics at etcdURL.
func ScrapeEtcd(ctx context.Context, etcdURL string) (map[string]float64, error) {
	body, err := get(ctx, etcdURL+"/metrics")
	if err != nil {
		return nil, fmt.Errorf("etcd metrics: %w", err)
	}
	return ParseMetrics(body, func(name string) bool {
		for _, m := range EtcdMetrics {
			if name == m {
				return true
			}
		}
		return false
	}), nil
}

func get(ctx context.Context, url string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return io.ReadAll(resp.Body)
}

// ParseMetrics sums the samples of the Prometheus text exposition in body
// whose metric name want accepts, over all label sets.
func ParseMetrics(body []byte, want func(string) bool) map[string]float64 {
	out := map[string]float64{}
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) != 2 {
			continue
		}
		name := f[0]
		if i := strings.Index(name, "{"); i >= 0 {
			name = name[:i]
		}
		if !want(name) {
			continue
		}
		if v, err := strconv.ParseFloat(f[1], 64); err == nil {
			out[name] += v
		}
	}
	return out
}

var labelRe = regexp.MustCompile(`(\w+)="([^"]*)"`)

// ScrapeRequests reads the API server's apiserver_request_total for nodes
// and leases, keyed "VERB resource[/subresource]". The counters restart
// with the API server.
func ScrapeRequests(ctx context.Context, admin kubernetes.Interface) (map[string]float64, error) {
	raw, err := admin.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("apiserver metrics: %w", err)
	}
	requests := map[string]float64{}
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "apiserver_request_total{") {
			continue
		}
		end := strings.LastIndex(line, "}")
		labels := map[string]string{}
		for _, m := range labelRe.FindAllStringSubmatch(line[:end], -1) {
			labels[m[1]] = m[2]
		}
		if labels["resource"] != "nodes" && labels["resource"] != "leases" {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(line[end+1:]), 64)
		if err != nil {
			continue
		}
		key := labels["verb"] + " " + labels["resource"]
		if labels["subresource"] != "" {
			key += "/" + labels["subresource"]
		}
		requests[key] += v
	}
	return requests, sc.Err()
}

// EtcdStatus is the part of etcd's maintenance status the benchmarks use.
type EtcdStatus struct {
	Revision    int64
	DBSize      int64
	DBSizeInUse int64
}

// etcdPost calls etcd's v3 JSON gateway (etcd 3.4 and later).
func etcdPost(ctx context.Context, etcdURL, path string, in any, out any) error {
	b, err := json.Marshal(in)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, etcdURL+path, bytes.NewReader(b))
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("etcd %s: %w", path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("etcd %s: %s: %s", path, resp.Status, strings.TrimSpace(string(body)))
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(body, out)
}

// Status reads etcd's revision and database size.
func Status(ctx context.Context, etcdURL string) (EtcdStatus, error) {
	var r struct {
		Header struct {
			Revision string `json:"revision"`
		} `json:"header"`
		DBSize      string `json:"dbSize"`
		DBSizeInUse string `json:"dbSizeInUse"`
	}
	if err := etcdPost(ctx, etcdURL, "/v3/maintenance/status", struct{}{}, &r); err != nil {
		return EtcdStatus{}, err
	}
	var s EtcdStatus
	s.Revision, _ = strconv.ParseInt(r.Header.Revision, 10, 64)
	s.DBSize, _ = strconv.ParseInt(r.DBSize, 10, 64)
	s.DBSizeInUse, _ = strconv.ParseInt(r.DBSizeInUse, 10, 64)
	return s, nil
}

// CompactAndDefrag compacts etcd's history up to its current revision
// (physically, waiting for it) and defragments the database, as an
// operator's maintenance job does. It returns the status before and after.
func CompactAndDefrag(ctx context.Context, etcdURL string) (before, after EtcdStatus, err error) {
	if before, err = Status(ctx, etcdURL); err != nil {
		return before, after, err
	}
	// The API server compacts every 5 minutes, always to an older revision
	// than the current one, so this compaction cannot be refused as stale.
	err = etcdPost(ctx, etcdURL, "/v3/kv/compaction", map[string]any{"revision": strconv.FormatInt(before.Revision, 10), "physical": true}, nil)
	if err != nil {
		return before, after, err
	}
	if err := etcdPost(ctx, etcdURL, "/v3/maintenance/defragment", struct{}{}, nil); err != nil {
		return before, after, err
	}
	after, err = Status(ctx, etcdURL)
	return before, after, err
}
