package nodeapi

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/pprof"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/types"

	"github.com/nodeagent/nodeagent/runtime"
)

// DebugOptions are kubelet's switches of the node API's debugging
// handlers (KubeletConfiguration enableDebuggingHandlers,
// enableProfilingHandler, enableDebugFlagsHandler, enableSystemLogHandler
// and the ContainerCheckpoint feature gate).
type DebugOptions struct {
	// Handlers serves exec, attach, port-forward, run, container logs,
	// /runningpods/, /configz, /checkpoint and the handlers below; off,
	// those paths answer 405 "Debug endpoints are disabled.".
	Handlers bool
	// Profiling serves Go's profiles at /debug/pprof/.
	Profiling bool
	// Flags serves /debug/flags/v: a PUT of a number calls SetVerbosity.
	Flags        bool
	SetVerbosity func(v uint32) error
	// SystemLog serves the files under SystemLogDir ("": kubelet's
	// /var/log) at /logs/.
	SystemLog    bool
	SystemLogDir string
	// LogQuery is kubelet's node log query on /logs/ (enableSystemLogQuery
	// with the NodeLogQuery gate; needs SystemLog): ?query=<service> is
	// the service's journal (journalctl), or its file under SystemLogDir,
	// ?query=/<file> that file. Journal runs journalctl (nil: the host's).
	LogQuery bool
	Journal  Journal
	// Checkpoint serves POST /checkpoint/{namespace}/{pod}/{container}
	// (the gate ContainerCheckpoint, on by default in 1.34).
	Checkpoint bool
}

// DefaultDebugOptions are kubelet 1.34's defaults: every handler on.
func DefaultDebugOptions() DebugOptions {
	return DebugOptions{Handlers: true, Profiling: true, Flags: true, SystemLog: true, Checkpoint: true}
}

// kubelet's paths of the debugging handlers.
const (
	pprofBasePath = "/debug/pprof/"
	debugFlagPath = "/debug/flags/v"
	logsPath      = "/logs/"
	nodeLogDir    = "/var/log"
)

// installDebugging installs what kubelet's NewServer installs after its
// handlers that need no authorization: with enableDebuggingHandlers its
// authorized handlers (exec, attach, port-forward, run, containerLogs,
// configz, runningpods, checkpoint) and the system log, profiling and
// flags handlers, each answering 405 with its message when its own field
// is off; without, 405 "Debug endpoints are disabled." on kubelet's list
// of paths (configz, checkpoint and flags are then 404).
func (s *Server) installDebugging(mux *http.ServeMux, d DebugOptions) {
	if !d.Handlers {
		off := disabled("Debug endpoints are disabled.")
		for _, p := range []string{"/run/", "/exec/", "/attach/", "/portForward/", "/containerLogs/", "/runningpods/", pprofBasePath, logsPath} {
			mux.Handle(p, off)
		}
		return
	}
	for _, m := range []string{"GET", "POST"} {
		mux.HandleFunc(m+" /exec/{namespace}/{pod}/{container}", s.exec)
		mux.HandleFunc(m+" /exec/{namespace}/{pod}/{uid}/{container}", s.exec)
		mux.HandleFunc(m+" /attach/{namespace}/{pod}/{container}", s.attach)
		mux.HandleFunc(m+" /attach/{namespace}/{pod}/{uid}/{container}", s.attach)
		mux.HandleFunc(m+" /portForward/{namespace}/{pod}", s.portForward)
		mux.HandleFunc(m+" /portForward/{namespace}/{pod}/{uid}", s.portForward)
	}
	mux.HandleFunc("POST /run/{namespace}/{pod}/{container}", s.run)
	mux.HandleFunc("POST /run/{namespace}/{pod}/{uid}/{container}", s.run)
	mux.HandleFunc("GET /containerLogs/{namespace}/{pod}/{container}", s.containerLogs)
	if s.opts.Configz != nil {
		mux.HandleFunc("GET /configz", s.configz)
	}
	mux.HandleFunc("GET /runningpods/", s.runningPods)
	if d.Checkpoint {
		mux.HandleFunc("POST /checkpoint/{namespace}/{pod}/{container}", s.checkpoint)
	}

	if d.SystemLog {
		dir := d.SystemLogDir
		if dir == "" {
			dir = nodeLogDir
		}
		files := http.FileServer(http.Dir(dir))
		if d.LogQuery {
			j := d.Journal
			if j == nil {
				j = execJournal{}
			}
			mux.Handle("GET "+logsPath, http.StripPrefix(logsPath, logQueryHandler{dir: dir, files: files, journal: j}))
		} else {
			mux.Handle("GET "+logsPath, http.StripPrefix(logsPath, files))
		}
	} else {
		mux.Handle(logsPath, disabled("logs endpoint is disabled."))
	}
	if d.Profiling {
		mux.HandleFunc("GET "+pprofBasePath, servePprof)
	} else {
		mux.Handle(pprofBasePath, disabled("profiling endpoint is disabled."))
	}
	if d.Flags && d.SetVerbosity != nil {
		mux.Handle(debugFlagPath, verbosityHandler(d.SetVerbosity))
	} else {
		mux.Handle(debugFlagPath, disabled("flags endpoint is disabled."))
	}
}

// disabled is kubelet's answer on a path whose handler is switched off.
func disabled(msg string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, msg, http.StatusMethodNotAllowed)
	})
}

// servePprof is kubelet's /debug/pprof/ handler: the CPU profile, symbol,
// cmdline and trace by name, anything else through pprof.Index (the index
// page, or a named profile: heap, allocs, goroutine, block, mutex,
// threadcreate).
func servePprof(w http.ResponseWriter, r *http.Request) {
	switch strings.TrimPrefix(r.URL.Path, pprofBasePath) {
	case "profile":
		pprof.Profile(w, r)
	case "symbol":
		pprof.Symbol(w, r)
	case "cmdline":
		pprof.Cmdline(w, r)
	case "trace":
		pprof.Trace(w, r)
	default:
		pprof.Index(w, r)
	}
}

// verbosityHandler is kubelet's /debug/flags/v (apiserver's
// StringFlagPutHandler with component-base's GlogSetter): PUT with a
// decimal number as the body sets the verbosity; any other method is 406.
func verbosityHandler(set func(uint32) error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPut {
			plainText(w, http.StatusNotAcceptable, "unsupported http method")
			return
		}
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<10))
		if err != nil {
			plainText(w, http.StatusBadRequest, "error reading request body: "+err.Error())
			return
		}
		val := string(body)
		v, err := strconv.ParseUint(val, 10, 32)
		if err != nil {
			plainText(w, http.StatusBadRequest, err.Error())
			return
		}
		if err := set(uint32(v)); err != nil {
			plainText(w, http.StatusBadRequest, err.Error())
			return
		}
		plainText(w, http.StatusOK, "successfully set klog.logging.verbosity to "+val)
	})
}

func plainText(w http.ResponseWriter, code int, text string) {
	w.Header().Set("Content-Type", "text/plain")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	fmt.Fprintln(w, text)
}

// writeError answers as go-restful's WriteError, which kubelet's handlers
// use: the message as the body, without a newline.
func writeError(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(code)
	_, _ = io.WriteString(w, msg)
}

// runOutputLimit bounds what /run keeps of each output stream (the CRI's
// ExecSync answer is a gRPC message of at most 16 MiB).
const runOutputLimit = 16 << 20

// run serves kubelet's /run/{namespace}/{pod}[/{uid}]/{container}?cmd=...:
// the command (split at spaces) runs in the running container, and its
// output (stdout, then stderr) is the answer; a non-zero exit is a 500
// with the CRI runtime's message.
func (s *Server) run(w http.ResponseWriter, r *http.Request) {
	ns, name, cname := r.PathValue("namespace"), r.PathValue("pod"), r.PathValue("container")
	pod, ok := s.opts.Pods.GetPodByName(ns, name)
	if !ok {
		writeError(w, http.StatusNotFound, "pod does not exist")
		return
	}
	cmd := strings.Split(r.URL.Query().Get("cmd"), " ")
	if uid := uidParam(r); uid != "" && types.UID(uid) != pod.UID {
		writeError(w, http.StatusInternalServerError, fmt.Sprintf("container not found (%q)", cname))
		return
	}
	c, err := s.runningContainer(r.Context(), pod, cname)
	if err != nil || s.opts.Exec == nil {
		writeError(w, http.StatusInternalServerError, fmt.Sprintf("container not found (%q)", cname))
		return
	}
	var stdout, stderr limitedBuffer
	stdout.max, stderr.max = runOutputLimit, runOutputLimit
	code, err := s.opts.Exec.Exec(r.Context(), c.ID, runtime.ExecOptions{Cmd: cmd, Stdout: &stdout, Stderr: &stderr})
	if err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	if code != 0 {
		// The CRI client's ExecSync error (k8s.io/cri-client).
		writeError(w, http.StatusInternalServerError, fmt.Sprintf("command '%s' exited with %d: %s", strings.Join(cmd, " "), code, stderr.String()))
		return
	}
	out := append(stdout.Bytes(), stderr.Bytes()...)
	if len(out) == 0 {
		w.WriteHeader(http.StatusOK)
		return
	}
	w.Header().Set("Content-Type", "application/json") // kubelet's, whatever the output
	_, _ = w.Write(out)
}

// limitedBuffer keeps the first max bytes written to it and drops the rest.
type limitedBuffer struct {
	bytes.Buffer
	max int
}

func (b *limitedBuffer) Write(p []byte) (int, error) {
	if room := b.max - b.Len(); room > 0 {
		b.Buffer.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

// errCheckpointUnimplemented is what kubelet gets from a runtime without
// container checkpointing: containerd's CRI before 2.0 (Debian's 1.6)
// answers CheckpointContainer with gRPC Unimplemented. nodeagent drives
// containerd directly and does not checkpoint containers (it would need
// CRIU and containerd's checkpoint archive format).
const errCheckpointUnimplemented = "rpc error: code = Unimplemented desc = method CheckpointContainer not implemented"

// checkpoint serves kubelet's POST /checkpoint/{namespace}/{pod}/{container}
// (nodes/checkpoint): the pod and container are checked as kubelet checks
// them, then the runtime's refusal is answered as kubelet answers it.
func (s *Server) checkpoint(w http.ResponseWriter, r *http.Request) {
	ns, name, cname := r.PathValue("namespace"), r.PathValue("pod"), r.PathValue("container")
	pod, ok := s.opts.Pods.GetPodByName(ns, name)
	if !ok {
		writeError(w, http.StatusNotFound, "pod does not exist")
		return
	}
	if !hasContainer(pod, cname) {
		writeError(w, http.StatusNotFound, fmt.Sprintf("container %v does not exist", cname))
		return
	}
	if ts := r.URL.Query()["timeout"]; len(ts) > 0 {
		if _, err := strconv.ParseInt(ts[len(ts)-1], 10, 64); err != nil {
			writeError(w, http.StatusNotFound, "cannot parse value of timeout parameter")
			return
		}
	}
	writeError(w, http.StatusInternalServerError, fmt.Sprintf("checkpointing of %v/%v/%v failed (%v)", ns, name, cname, errCheckpointUnimplemented))
}
