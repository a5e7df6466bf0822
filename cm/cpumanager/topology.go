package cpumanager

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"k8s.io/utils/cpuset"
)

// CPUInfo places one logical CPU: its socket, its physical core (the
// lowest CPU ID among the core's threads, unique across sockets, as
// kubelet numbers cores) and its NUMA node.
type CPUInfo struct {
	Socket, Core, NUMANode int
}

// Topology is the node's logical CPUs by ID.
type Topology map[int]CPUInfo

// CPUs are all the logical CPUs.
func (t Topology) CPUs() cpuset.CPUSet {
	ids := make([]int, 0, len(t))
	for id := range t {
		ids = append(ids, id)
	}
	return cpuset.New(ids...)
}

// cpusWhere are the CPUs whose info matches.
func (t Topology) cpusWhere(match func(CPUInfo) bool) cpuset.CPUSet {
	var ids []int
	for id, info := range t {
		if match(info) {
			ids = append(ids, id)
		}
	}
	return cpuset.New(ids...)
}

// CPUsInCore and CPUsInSocket are the logical CPUs of a core or socket.
func (t Topology) CPUsInCore(core int) cpuset.CPUSet {
	return t.cpusWhere(func(i CPUInfo) bool { return i.Core == core })
}

func (t Topology) CPUsInSocket(socket int) cpuset.CPUSet {
	return t.cpusWhere(func(i CPUInfo) bool { return i.Socket == socket })
}

// ids are the distinct values of f over cpus, sorted.
func (t Topology) ids(cpus cpuset.CPUSet, f func(CPUInfo) int) []int {
	var out []int
	for _, c := range cpus.List() {
		if v := f(t[c]); !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	slices.Sort(out)
	return out
}

// CPUsPerCore is the number of threads of a core (kubelet's: logical
// CPUs divided by cores).
func (t Topology) CPUsPerCore() int {
	cores := len(t.ids(t.CPUs(), func(i CPUInfo) int { return i.Core }))
	if cores == 0 {
		return 0
	}
	return len(t) / cores
}

// Discover reads the online CPUs' topology from sysfs under root
// ("/sys/devices/system/cpu" on a node): topology/physical_package_id,
// topology/core_id and the nodeN link of each CPU.
func Discover(root string) (Topology, error) {
	b, err := os.ReadFile(filepath.Join(root, "online"))
	if err != nil {
		return nil, fmt.Errorf("cpu topology: %w", err)
	}
	online, err := cpuset.Parse(strings.TrimSpace(string(b)))
	if err != nil {
		return nil, fmt.Errorf("cpu topology: online CPUs: %w", err)
	}
	type coreKey struct{ socket, core int }
	lowest := map[coreKey]int{}
	raw := map[int]coreKey{}
	numa := map[int]int{}
	for _, c := range online.List() {
		dir := filepath.Join(root, "cpu"+strconv.Itoa(c))
		socket, err := readInt(filepath.Join(dir, "topology", "physical_package_id"))
		if err != nil {
			return nil, fmt.Errorf("cpu topology: %w", err)
		}
		core, err := readInt(filepath.Join(dir, "topology", "core_id"))
		if err != nil {
			return nil, fmt.Errorf("cpu topology: %w", err)
		}
		k := coreKey{socket, core}
		raw[c] = k
		if l, ok := lowest[k]; !ok || c < l {
			lowest[k] = c
		}
		numa[c] = 0
		if ents, err := os.ReadDir(dir); err == nil {
			for _, e := range ents {
				if n, ok := strings.CutPrefix(e.Name(), "node"); ok {
					if id, err := strconv.Atoi(n); err == nil {
						numa[c] = id
					}
				}
			}
		}
	}
	t := Topology{}
	for c, k := range raw {
		t[c] = CPUInfo{Socket: k.socket, Core: lowest[k], NUMANode: numa[c]}
	}
	if len(t) == 0 {
		return nil, fmt.Errorf("cpu topology: no online CPUs in %s", root)
	}
	return t, nil
}

func readInt(path string) (int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(b)))
}
