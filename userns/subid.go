package userns

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/types"

	"github.com/nodeagent/nodeagent/internal/atomicfile"
)

// KubeletUser is the user whose subordinate IDs are the agent's range
// (kubelet's).
const KubeletUser = "kubelet"

// HostRange returns the range of host IDs for pods as kubelet finds it:
// without a user named "kubelet", kubelet's default (DefaultFirstID,
// DefaultLength). With one, its entries in subuid and subgid
// (/etc/subuid, /etc/subgid: "name-or-uid:first:count"), which must be
// one line each and the same range; a user without entries also gets the
// default (kubelet's, where the getsubids tool is not installed).
func HostRange(lookup func(name string) (*user.User, error), subuid, subgid []byte) (Range, error) {
	u, err := lookup(KubeletUser)
	if err != nil {
		var unknown user.UnknownUserError
		if errors.As(err, &unknown) {
			return Range{First: DefaultFirstID, Length: DefaultLength}, nil
		}
		return Range{}, err
	}
	us, err := subIDLines(subuid, u)
	if err != nil {
		return Range{}, fmt.Errorf("error retrieving additional uids for user %q: %w", KubeletUser, err)
	}
	gs, err := subIDLines(subgid, u)
	if err != nil {
		return Range{}, fmt.Errorf("error retrieving additional gids for user %q: %w", KubeletUser, err)
	}
	if len(us) == 0 && len(gs) == 0 {
		return Range{First: DefaultFirstID, Length: DefaultLength}, nil
	}
	if strings.Join(us, "\n") != strings.Join(gs, "\n") {
		return Range{}, fmt.Errorf("mismatched subuids and subgids for user %q", KubeletUser)
	}
	if len(us) != 1 {
		return Range{}, fmt.Errorf("error parsing line %q: it must contain only one line", strings.Join(us, "\n"))
	}
	_, rest, _ := strings.Cut(us[0], ":")
	a, b, ok := strings.Cut(rest, ":")
	first, err1 := strconv.ParseUint(a, 10, 32)
	count, err2 := strconv.ParseUint(b, 10, 32)
	if !ok || err1 != nil || err2 != nil {
		return Range{}, fmt.Errorf("invalid line %q", us[0])
	}
	return Range{First: uint32(first), Length: uint32(count)}, nil
}

// subIDLines returns the lines of a subuid/subgid file for u (by name or
// numeric ID), normalised to "name:first:count".
func subIDLines(data []byte, u *user.User) ([]string, error) {
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		parts := strings.Split(line, ":")
		if len(parts) != 3 || (parts[0] != u.Username && parts[0] != u.Uid) {
			continue
		}
		out = append(out, u.Username+":"+parts[1]+":"+parts[2])
	}
	return out, sc.Err()
}

// ReadHostRange is HostRange from this host's users and files.
func ReadHostRange() (Range, error) {
	subuid, err := readOptional("/etc/subuid")
	if err != nil {
		return Range{}, err
	}
	subgid, err := readOptional("/etc/subgid")
	if err != nil {
		return Range{}, err
	}
	return HostRange(user.Lookup, subuid, subgid)
}

func readOptional(p string) ([]byte, error) {
	b, err := os.ReadFile(p)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	return b, err
}

// DirStore keeps allocations as kubelet does: the file FileName in each
// pod's directory under Dir (<rootDir>/pods).
type DirStore struct{ Dir string }

var _ Store = DirStore{}

func (s DirStore) path(uid types.UID) string { return filepath.Join(s.Dir, string(uid), FileName) }

func (s DirStore) List() ([]types.UID, error) {
	es, err := os.ReadDir(s.Dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []types.UID
	for _, e := range es {
		if e.IsDir() {
			out = append(out, types.UID(e.Name()))
		}
	}
	return out, nil
}

func (s DirStore) Read(uid types.UID) ([]byte, error) {
	b, err := os.ReadFile(s.path(uid))
	if errors.Is(err, os.ErrNotExist) {
		return nil, ErrNotFound
	}
	return b, err
}

// Write replaces the pod's file atomically and syncs its directory, so
// that the allocation survives a crash once Write returns.
func (s DirStore) Write(uid types.UID, data []byte) error {
	dir := filepath.Dir(s.path(uid))
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return err
	}
	if err := atomicfile.Write(s.path(uid), data); err != nil {
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

func (s DirStore) Remove(uid types.UID) error {
	err := os.Remove(s.path(uid))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return err
}
