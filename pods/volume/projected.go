package volume

// Projected volumes, as kubelet writes them: the kube-api-access-* volume
// the API server's ServiceAccount admission adds to every pod (a bound
// service account token, the cluster's CA bundle from the ConfigMap
// kube-root-ca.crt and the pod's namespace), and any projected volume made
// of the same kinds of sources.
//
// Layout: <podDir>/volumes/projected/<volume name> is a tmpfs (nosuid,
// nodev, mode 0755) that holds the files as kubelet's AtomicWriter does:
//
//	..2026_11_22_10_30_00.123456/<files>   a timestamped data directory
//	..data -> ..2026_11_22_10_30_00.123456 swapped with one rename
//	<top-level name> -> ..data/<top-level name>
//
// so that a container reading through the user-visible names sees either
// the old or the new set of files, never a mix or a half-written file.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	utilptr "k8s.io/utils/ptr"

	"github.com/nodeagent/nodeagent/kubetypes"
)

const (
	// projectedPlugin is the directory of projected volumes under
	// <podDir>/volumes.
	projectedPlugin = "projected"

	// projectedMinSize is the smallest tmpfs of a projected volume. A
	// volume whose payload needs more (it must fit twice, old and new,
	// during a swap) gets a larger one.
	projectedMinSize = 16 << 20

	// defaultProjectedMode is the API's default defaultMode.
	defaultProjectedMode int32 = 0o644

	// defaultTokenExpirationSeconds is the API's default expirationSeconds
	// of a serviceAccountToken projection.
	defaultTokenExpirationSeconds int64 = 3600

	// dataDirName is the symlink to the current data directory.
	dataDirName = "..data"
)

// Projector writes the volumes whose files the agent makes: secret,
// configMap, downwardAPI and projected volumes (with serviceAccountToken
// sources through the TokenRequest API, secret and configMap sources, and
// downwardAPI sources: fieldRefs metadata.name, metadata.namespace,
// metadata.uid, metadata.labels, metadata.annotations and single labels
// or annotations, and resourceFieldRefs).
//
// It reads with the node's credentials: under the Node authorizer these may
// request tokens for, and read the Secrets and ConfigMaps referenced by,
// pods bound to the node, and nothing else; so pods without a node binding
// (static pods) cannot use them.
//
// Tokens come from a Tokens cache (shared with CSI drivers' tokenRequests);
// Secrets and ConfigMaps come from the getters (watched objects: see package objcache). Setup may
// be called concurrently for different pods; calls for one pod must not
// overlap (one worker per pod).
type Projector struct {
	tokens     *Tokens
	secrets    SecretGetter
	configMaps ConfigMapGetter
	node       func() *v1.Node
	clock      clock.Clock
	log        *slog.Logger
}

// ServiceAccountClient requests tokens for one namespace's service
// accounts: client-go's typed client (CoreV1().ServiceAccounts, and its
// fake) and internal/kubeclient's satisfy it.
type ServiceAccountClient interface {
	CreateToken(ctx context.Context, name string, tr *authenticationv1.TokenRequest, opts metav1.CreateOptions) (*authenticationv1.TokenRequest, error)
}

// ServiceAccountsGetter returns the ServiceAccounts client of a namespace.
type ServiceAccountsGetter func(namespace string) ServiceAccountClient

// ProjectorOptions configure a Projector.
type ProjectorOptions struct {
	// Client requests tokens; nil without an API server (tokens then fail
	// to mount). Unused when Tokens is set.
	Client ServiceAccountsGetter
	// Tokens is the token cache to use (shared with the CSI mounter);
	// nil: one of the Projector's own, requesting through Client.
	Tokens *Tokens
	// Secrets and ConfigMaps read the objects pods reference (watched
	// caches: objcache); nil without an API server (they then fail to
	// mount).
	Secrets    SecretGetter
	ConfigMaps ConfigMapGetter
	// Node returns the Node, whose allocatable is the default of unset
	// limits in resourceFieldRefs; nil, or a nil Node: the machine's
	// capacity.
	Node   func() *v1.Node
	Clock  clock.Clock
	Logger *slog.Logger
}

// NewProjectorWithOptions returns a Projector configured by o.
func NewProjectorWithOptions(o ProjectorOptions) *Projector {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.Tokens == nil {
		o.Tokens = NewTokens(o.Client, o.Clock, o.Logger)
	}
	return &Projector{
		tokens:     o.Tokens,
		secrets:    o.Secrets,
		configMaps: o.ConfigMaps,
		node:       o.Node,
		clock:      o.Clock,
		log:        o.Logger,
	}
}

// fileProjection is one file of a volume's payload.
type fileProjection struct {
	data []byte
	mode fs.FileMode
}

// Setup writes every secret, configMap, downwardAPI and projected volume
// of pod under podDir and returns volume name → host directory, and when
// Setup must run again to refresh them (zero: never; the earliest refresh
// time of the pod's tokens). Changed Secrets, ConfigMaps and pod metadata
// are written by the next Setup (the worker's next sync).
//
// Setup is idempotent and cheap when nothing changed: a volume's files are
// rewritten (atomically) only when their content or mode changed, and a
// token is requested only when it has none cached or the cached one is due
// for refresh (Tokens).
//
// Each volume that fails is a *MountError (see MountErrors), all of them
// joined; the volumes that could be written are, and a failed volume keeps
// its previous contents. TeardownVolumes removes them with the pod.
func (p *Projector) Setup(ctx context.Context, pod *v1.Pod, podDir string) (map[string]string, time.Time, error) {
	if !filepath.IsAbs(podDir) {
		return nil, time.Time{}, fmt.Errorf("projected volumes: pod directory %q must be absolute", podDir)
	}
	out := map[string]string{}
	var (
		next time.Time
		errs []error
	)
	for i := range pod.Spec.Volumes {
		v := &pod.Spec.Volumes[i]
		if !isPayloadVolume(v) {
			continue
		}
		dir, refreshAt, err := p.setupOne(ctx, pod, i, podDir)
		if err != nil {
			errs = append(errs, &MountError{Volume: v.Name, Err: err})
			continue
		}
		out[v.Name] = dir
		if !refreshAt.IsZero() && (next.IsZero() || refreshAt.Before(next)) {
			next = refreshAt
		}
	}
	if len(errs) > 0 {
		return nil, time.Time{}, errors.Join(errs...)
	}
	return out, next, nil
}

func (p *Projector) setupOne(ctx context.Context, pod *v1.Pod, vi int, podDir string) (string, time.Time, error) {
	v := &pod.Spec.Volumes[vi]
	payload, refreshAt, err := p.collect(ctx, pod, vi)
	if err != nil {
		return "", time.Time{}, err
	}
	dir := filepath.Join(volumesDir(podDir), pluginOf(v), v.Name)
	if err := mountProjected(dir, payloadSize(payload)); err != nil {
		return "", time.Time{}, err
	}
	fsGroup := fsGroupOf(pod)
	changed, err := writeAtomicOwned(dir, withFSGroup(payload, fsGroup), p.clock.Now(), fsGroup)
	if err != nil {
		return "", time.Time{}, err
	}
	if fsGroup != nil {
		if err := os.Lchown(dir, -1, int(*fsGroup)); err != nil {
			return "", time.Time{}, err
		}
		if err := os.Chmod(dir, 0o755|fs.ModeSetgid); err != nil {
			return "", time.Time{}, err
		}
	}
	if changed {
		p.log.Debug("volume written", "pod", kubetypes.FullName(pod), "podUID", pod.UID, "volume", v.Name, "files", len(payload))
	}
	return dir, refreshAt, nil
}

// Forget drops the cached tokens of the pod with uid; call it when the pod
// is gone. (Tokens of forgotten pods are also dropped once they expire.)
func (p *Projector) Forget(uid types.UID) {
	p.tokens.Forget(uid)
	if p.secrets != nil {
		p.secrets.Release(uid)
	}
	if p.configMaps != nil {
		p.configMaps.Release(uid)
	}
}

// collect computes the payload of the volume pod.Spec.Volumes[vi] and the
// time its token(s) need refreshing (zero if it has none). Errors of every
// source are returned together.
func (p *Projector) collect(ctx context.Context, pod *v1.Pod, vi int) (map[string]fileProjection, time.Time, error) {
	v := &pod.Spec.Volumes[vi]
	payload := map[string]fileProjection{}
	var (
		errs []error
		next time.Time
	)
	add := func(where, path string, data []byte, mode int32) {
		if _, dup := payload[path]; dup {
			errs = append(errs, fmt.Errorf("%spath %q: used by an earlier source of the volume", where, path))
			return
		}
		payload[path] = fileProjection{data: data, mode: fs.FileMode(mode)}
	}
	addAll := func(where string, files []projectedFile, err error) {
		if err != nil {
			errs = append(errs, fmt.Errorf("%s%w", where, err))
			return
		}
		for _, f := range files {
			add(where, f.path, f.data, f.mode)
		}
	}
	switch {
	case v.Secret != nil:
		files, err := p.secretFiles(ctx, pod, v.Secret.SecretName, v.Secret.Items, isTrue(v.Secret.Optional), modeOr(v.Secret.DefaultMode, defaultProjectedMode))
		addAll("", files, err)
	case v.ConfigMap != nil:
		files, err := p.configMapFiles(ctx, pod, v.ConfigMap.Name, v.ConfigMap.Items, isTrue(v.ConfigMap.Optional), modeOr(v.ConfigMap.DefaultMode, defaultProjectedMode))
		addAll("", files, err)
	case v.DownwardAPI != nil:
		files, err := p.downwardAPIFiles(pod, v.DownwardAPI.Items, modeOr(v.DownwardAPI.DefaultMode, defaultProjectedMode))
		addAll("", files, err)
	case v.Projected != nil:
		src := v.Projected
		defaultMode := modeOr(src.DefaultMode, defaultProjectedMode)
		for si := range src.Sources {
			s := &src.Sources[si]
			where := fmt.Sprintf("spec.volumes[%d].projected.sources[%d]", vi, si)
			switch {
			case s.ServiceAccountToken != nil:
				where += ".serviceAccountToken: "
				tok, refreshAt, err := p.token(ctx, pod, s.ServiceAccountToken)
				if err != nil {
					errs = append(errs, fmt.Errorf("%s%w", where, err))
					continue
				}
				if next.IsZero() || refreshAt.Before(next) {
					next = refreshAt
				}
				add(where, s.ServiceAccountToken.Path, []byte(tok), defaultMode)
			case s.ConfigMap != nil:
				files, err := p.configMapFiles(ctx, pod, s.ConfigMap.Name, s.ConfigMap.Items, isTrue(s.ConfigMap.Optional), defaultMode)
				addAll(fmt.Sprintf("%s.configMap %q: ", where, s.ConfigMap.Name), files, err)
			case s.Secret != nil:
				files, err := p.secretFiles(ctx, pod, s.Secret.Name, s.Secret.Items, isTrue(s.Secret.Optional), defaultMode)
				addAll(fmt.Sprintf("%s.secret %q: ", where, s.Secret.Name), files, err)
			case s.DownwardAPI != nil:
				files, err := p.downwardAPIFiles(pod, s.DownwardAPI.Items, defaultMode)
				addAll(where+".downwardAPI: ", files, err)
			default:
				errs = append(errs, fmt.Errorf("%s: unsupported source (only serviceAccountToken, secret, configMap and downwardAPI are supported)", where))
			}
		}
	}
	if len(errs) > 0 {
		return nil, time.Time{}, errors.Join(errs...)
	}
	return payload, next, nil
}

func isTrue(b *bool) bool { return b != nil && *b }

// token returns the token of one serviceAccountToken source, from the
// cache or the TokenRequest API, and when to refresh it.
func (p *Projector) token(ctx context.Context, pod *v1.Pod, src *v1.ServiceAccountTokenProjection) (string, time.Time, error) {
	sa := pod.Spec.ServiceAccountName
	if sa == "" {
		return "", time.Time{}, errors.New("the pod has no serviceAccountName")
	}
	exp := utilptr.To(defaultTokenExpirationSeconds)
	if src.ExpirationSeconds != nil {
		exp = utilptr.To(*src.ExpirationSeconds)
	}
	tok, err := p.tokens.Get(ctx, pod, src.Audience, exp)
	if err != nil {
		return "", time.Time{}, fmt.Errorf("request a token for service account %s/%s: %w", pod.Namespace, sa, err)
	}
	return tok.Token, tok.RefreshAt, nil
}

type projectedFile struct {
	path string
	data []byte
	mode int32
}

// downwardAPIValue is the content of a downwardAPI item's fieldRef:
// metadata.name, metadata.namespace, metadata.uid, metadata.labels and
// metadata.annotations (sorted key="quoted value" lines, as kubelet writes
// them), and one label or annotation (metadata.labels['k']).
func downwardAPIValue(pod *v1.Pod, item v1.DownwardAPIVolumeFile) (string, error) {
	if item.ResourceFieldRef != nil {
		return "", errors.New("resourceFieldRef is not supported")
	}
	if item.FieldRef == nil {
		return "", errors.New("no fieldRef")
	}
	if v := item.FieldRef.APIVersion; v != "" && v != "v1" {
		return "", fmt.Errorf("fieldRef: unsupported apiVersion %q", v)
	}
	switch fp := item.FieldRef.FieldPath; fp {
	case "metadata.labels":
		return formatMap(pod.Labels), nil
	case "metadata.annotations":
		return formatMap(pod.Annotations), nil
	default:
		if k, ok := subscript(fp, "metadata.labels"); ok {
			return pod.Labels[k], nil
		}
		if k, ok := subscript(fp, "metadata.annotations"); ok {
			return pod.Annotations[k], nil
		}
		if v, ok := kubetypes.MetadataField(pod, fp); ok {
			return v, nil
		}
		return "", fmt.Errorf("fieldRef: unsupported fieldPath %q", fp)
	}
}

// subscript returns k of a path prefix['k'].
func subscript(path, prefix string) (string, bool) {
	rest, ok := strings.CutPrefix(path, prefix+"['")
	if !ok || !strings.HasSuffix(rest, "']") {
		return "", false
	}
	return strings.TrimSuffix(rest, "']"), true
}

// formatMap writes m as sorted key="value" lines (Go-quoted values), with
// no trailing newline.
func formatMap(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(k)
		b.WriteByte('=')
		b.WriteString(strconv.Quote(m[k]))
	}
	return b.String()
}

func payloadSize(payload map[string]fileProjection) int64 {
	var n int64
	for _, f := range payload {
		n += int64(len(f.data))
	}
	return n
}

// tmpfsSize is the size of the tmpfs for a payload of n bytes: room for
// two copies (old and new during a swap) and metadata.
func tmpfsSize(n int64) int64 {
	return max(projectedMinSize, 2*n+1<<20)
}

// mountProjected makes dir a tmpfs (nosuid, nodev, mode 0755) big enough
// for a payload of n bytes; an existing mount is kept, and grown when too
// small.
func mountProjected(dir string, n int64) error {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return err
	}
	mounted, err := isMountPoint(dir)
	if err != nil {
		return err
	}
	want := tmpfsSize(n)
	if mounted {
		var st unix.Statfs_t
		if err := unix.Statfs(dir, &st); err != nil {
			return fmt.Errorf("statfs %s: %w", dir, err)
		}
		if int64(st.Blocks)*st.Bsize >= want {
			return nil
		}
		opts := "size=" + strconv.FormatInt(want, 10)
		if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_REMOUNT|unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
			return fmt.Errorf("grow tmpfs on %s (%s): %w", dir, opts, err)
		}
		return nil
	}
	opts := withNoswap("mode=0755,size=" + strconv.FormatInt(want, 10))
	if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
		return fmt.Errorf("mount tmpfs (%s) on %s: %w", opts, dir, err)
	}
	return nil
}

// ValidatePayloadPath checks that a payload path is relative, clean, not
// reserved (a first component starting with "..") and within the limits
// of file names.
func ValidatePayloadPath(p string) error {
	switch {
	case p == "":
		return errors.New("empty path")
	case filepath.IsAbs(p):
		return errors.New("must be relative")
	case strings.HasPrefix(p, ".."):
		return errors.New("must not start with '..'")
	case len(p) > 4096:
		return errors.New("longer than 4096 characters")
	}
	for _, c := range strings.Split(p, "/") {
		switch {
		case c == "..":
			return errors.New("must not contain '..'")
		case c == "" || c == ".":
			return errors.New("must be a clean path")
		case len(c) > 255:
			return errors.New("a file name is longer than 255 characters")
		}
	}
	return nil
}

// writeAtomic makes dir hold exactly payload, the way kubelet's
// AtomicWriter does (see the top of this file), and reports whether it
// wrote anything: nothing is written when the current data directory
// already holds payload with the same modes. now names the new data
// directory.
func writeAtomic(dir string, payload map[string]fileProjection, now time.Time) (bool, error) {
	return writeAtomicOwned(dir, payload, now, nil)
}

// writeAtomicOwned is writeAtomic whose new files and directories belong
// to group *fsGroup (when not nil), as kubelet's volume ownership makes
// them: the caller adds the group's read bits to the payload's modes
// (withFSGroup); directories get setgid.
func writeAtomicOwned(dir string, payload map[string]fileProjection, now time.Time, fsGroup *int64) (bool, error) {
	for p, f := range payload {
		if err := ValidatePayloadPath(p); err != nil {
			return false, fmt.Errorf("path %q: %w", p, err)
		}
		if f.mode&^fs.ModePerm != 0 {
			return false, fmt.Errorf("path %q: mode %#o is not within 0 and 0777", p, f.mode)
		}
	}
	dataLink := filepath.Join(dir, dataDirName)
	oldTS, err := os.Readlink(dataLink)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		oldTS = ""
	case err != nil:
		return false, err
	}
	if oldTS != "" {
		same, err := dirHolds(filepath.Join(dir, oldTS), payload)
		if err != nil {
			return false, err
		}
		if same {
			// Repair missing user-visible links (a crash between the
			// swap and their creation).
			return false, linkVisible(dir, payload)
		}
	}

	tsDir, err := os.MkdirTemp(dir, now.UTC().Format("..2006_01_02_15_04_05."))
	if err != nil {
		return false, err
	}
	if err := writeFiles(tsDir, payload, fsGroup); err != nil {
		_ = os.RemoveAll(tsDir)
		return false, err
	}
	tmpLink := filepath.Join(dir, "..data_tmp")
	_ = os.Remove(tmpLink)
	if err := os.Symlink(filepath.Base(tsDir), tmpLink); err != nil {
		_ = os.RemoveAll(tsDir)
		return false, err
	}
	if err := os.Rename(tmpLink, dataLink); err != nil {
		_ = os.Remove(tmpLink)
		_ = os.RemoveAll(tsDir)
		return false, fmt.Errorf("swap %s: %w", dataLink, err)
	}
	if err := linkVisible(dir, payload); err != nil {
		return true, err
	}
	// Remove what is no longer in the payload, then the old data (and any
	// data directory left by an interrupted write).
	entries, err := os.ReadDir(dir)
	if err != nil {
		return true, err
	}
	visible := topLevel(payload)
	for _, e := range entries {
		name := e.Name()
		switch {
		case name == dataDirName || name == filepath.Base(tsDir):
		case strings.HasPrefix(name, ".."):
			if err := os.RemoveAll(filepath.Join(dir, name)); err != nil {
				return true, err
			}
		case !visible[name]:
			if err := os.Remove(filepath.Join(dir, name)); err != nil {
				return true, err
			}
		}
	}
	return true, nil
}

// topLevel is the set of first path components of payload.
func topLevel(payload map[string]fileProjection) map[string]bool {
	out := map[string]bool{}
	for p := range payload {
		first, _, _ := strings.Cut(p, "/")
		out[first] = true
	}
	return out
}

// linkVisible creates <dir>/<x> -> ..data/<x> for each top-level name x
// of payload that is missing.
func linkVisible(dir string, payload map[string]fileProjection) error {
	for name := range topLevel(payload) {
		link := filepath.Join(dir, name)
		target := filepath.Join(dataDirName, name)
		cur, err := os.Readlink(link)
		if err == nil && cur == target {
			continue
		}
		if err == nil || !errors.Is(err, fs.ErrNotExist) {
			// Something else is in the way.
			if err := os.RemoveAll(link); err != nil {
				return err
			}
		}
		if err := os.Symlink(target, link); err != nil {
			return err
		}
	}
	return nil
}

func writeFiles(dir string, payload map[string]fileProjection, fsGroup *int64) error {
	if err := os.Chmod(dir, 0o755); err != nil {
		return err
	}
	for p, f := range payload {
		full := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(full, f.data, f.mode); err != nil {
			return err
		}
		// WriteFile's mode is filtered by the umask.
		if err := os.Chmod(full, f.mode); err != nil {
			return err
		}
	}
	if fsGroup == nil {
		return nil
	}
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := os.Lchown(p, -1, int(*fsGroup)); err != nil {
			return err
		}
		if d.IsDir() {
			// Chown clears setgid; kubelet's directories of a group are
			// setgid and searchable by it.
			return os.Chmod(p, 0o755|fs.ModeSetgid)
		}
		return nil
	})
}

// withFSGroup returns payload with the group-read bits kubelet adds to the
// files of read-only volumes owned by an fsGroup (nil: payload as is).
func withFSGroup(payload map[string]fileProjection, fsGroup *int64) map[string]fileProjection {
	if fsGroup == nil {
		return payload
	}
	out := make(map[string]fileProjection, len(payload))
	for p, f := range payload {
		f.mode |= 0o440
		out[p] = f
	}
	return out
}

// fsGroupOf is the pod's securityContext.fsGroup (nil: none).
func fsGroupOf(pod *v1.Pod) *int64 {
	if sc := pod.Spec.SecurityContext; sc != nil {
		return sc.FSGroup
	}
	return nil
}

// dirHolds reports whether dir holds exactly the regular files of payload
// with their content and mode.
func dirHolds(dir string, payload map[string]fileProjection) (bool, error) {
	seen := 0
	same := true
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		f, ok := payload[rel]
		if !ok || !d.Type().IsRegular() {
			same = false
			return filepath.SkipAll
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if info.Mode().Perm() != f.mode {
			same = false
			return filepath.SkipAll
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if !bytes.Equal(data, f.data) {
			same = false
			return filepath.SkipAll
		}
		seen++
		return nil
	})
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return same && seen == len(payload), nil
}
