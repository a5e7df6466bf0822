package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"

	"github.com/nodeagent/nodeagent/config"
)

const configUsage = `Usage:
  nodeagent config validate --config FILE [--config-dir DIR]
  nodeagent config validate FILE
      Check a configuration (and its drop-ins); print every error and warning.
      Exits 1 if the configuration is invalid.
  nodeagent config defaults
      Print the complete default configuration as commented YAML.
  nodeagent config effective [--config FILE] [--config-dir DIR] [--kubeconfig FILE]
                             [--hostname-override NAME] [--node-ip IP] [-v N]
      Print the configuration the agent would run with, after drop-ins and flags,
      noting where each non-default value comes from.
`

// runConfigCommand runs `nodeagent config ...`; args start after "config".
// It returns the exit code: 0 success, 1 invalid configuration, 2 usage.
func runConfigCommand(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, configUsage)
		return 2
	}
	switch args[0] {
	case "validate":
		return configValidate(args[1:], stdout, stderr)
	case "defaults":
		if len(args) > 1 {
			fmt.Fprintf(stderr, "nodeagent config defaults: unexpected arguments %q\n", args[1:])
			return 2
		}
		_, _ = stdout.Write(config.DefaultsYAML())
		return 0
	case "effective":
		return configEffective(args[1:], stdout, stderr)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, configUsage)
		return 0
	}
	fmt.Fprintf(stderr, "nodeagent config: unknown command %q\n%s", args[0], configUsage)
	return 2
}

// configFlags are the flags the config commands share with the agent.
type configFlags struct {
	fs                                        *flag.FlagSet
	path, dropInDir                           string
	kubeconfig, hostnameOverride, nodeIP, vrb optionalString
	// kubelet's credential provider flags.
	credProviderConfig, credProviderBinDir optionalString
	bootstrapKubeconfig, certDir           optionalString
}

// optionalString is a string flag that knows whether it was set.
type optionalString struct {
	value string
	set   bool
}

func (o *optionalString) String() string { return o.value }
func (o *optionalString) Set(s string) error {
	o.value, o.set = s, true
	return nil
}

func (o *optionalString) ptr() *string {
	if !o.set {
		return nil
	}
	s := o.value
	return &s
}

func newConfigFlags(name string, stderr io.Writer, withOverrides bool) *configFlags {
	f := &configFlags{fs: flag.NewFlagSet("nodeagent config "+name, flag.ContinueOnError)}
	f.fs.SetOutput(stderr)
	f.fs.StringVar(&f.path, "config", "", "configuration file")
	f.fs.StringVar(&f.dropInDir, "config-dir", "", "drop-in directory; its *.conf files apply in lexical order over --config")
	if withOverrides {
		f.fs.Var(&f.kubeconfig, "kubeconfig", "kubeconfig with the node's credentials (overrides the file)")
		f.fs.Var(&f.bootstrapKubeconfig, "bootstrap-kubeconfig", "kubeconfig to obtain the node's client certificate with when --kubeconfig is missing or its certificate unusable (TLS bootstrap)")
		f.fs.Var(&f.certDir, "cert-dir", "directory of the certificates the agent obtains (default rootDir/pki)")
		f.fs.Var(&f.hostnameOverride, "hostname-override", "node name (overrides the file)")
		f.fs.Var(&f.nodeIP, "node-ip", "node IP address (overrides the file)")
		f.fs.Var(&f.vrb, "v", "log verbosity (overrides the file)")
		f.fs.Var(&f.credProviderConfig, "image-credential-provider-config", "credential provider plugin config file or directory (kubelet's flag; overrides the file)")
		f.fs.Var(&f.credProviderBinDir, "image-credential-provider-bin-dir", "credential provider plugin directory (kubelet's flag; overrides the file)")
	}
	return f
}

func (f *configFlags) options() (config.LoadOptions, error) {
	o := config.LoadOptions{Path: f.path, DropInDir: f.dropInDir}
	o.Overrides.Kubeconfig = f.kubeconfig.ptr()
	o.Overrides.HostnameOverride = f.hostnameOverride.ptr()
	o.Overrides.BootstrapKubeconfig = f.bootstrapKubeconfig.ptr()
	o.Overrides.CertDir = f.certDir.ptr()
	o.Overrides.NodeIP = f.nodeIP.ptr()
	o.Overrides.ImageCredentialProviderConfig = f.credProviderConfig.ptr()
	o.Overrides.ImageCredentialProviderBinDir = f.credProviderBinDir.ptr()
	if f.vrb.set {
		n, err := strconv.ParseInt(f.vrb.value, 10, 32)
		if err != nil {
			return o, fmt.Errorf("invalid value %q for flag -v: must be an integer", f.vrb.value)
		}
		v := int32(n)
		o.Overrides.Verbosity = &v
	}
	return o, nil
}

func configValidate(args []string, stdout, stderr io.Writer) int {
	f := newConfigFlags("validate", stderr, true)
	if err := f.fs.Parse(args); err != nil {
		return 2
	}
	switch rest := f.fs.Args(); {
	case len(rest) == 1 && f.path == "":
		f.path = rest[0]
	case len(rest) > 0:
		fmt.Fprintf(stderr, "nodeagent config validate: unexpected arguments %q\n", rest)
		return 2
	}
	if f.path == "" && f.dropInDir == "" {
		fmt.Fprintln(stderr, "nodeagent config validate: --config FILE or --config-dir DIR is required")
		return 2
	}
	o, err := f.options()
	if err != nil {
		fmt.Fprintln(stderr, "nodeagent config validate:", err)
		return 2
	}
	res, ok := loadAndReport(o, stderr)
	if !ok {
		return 1
	}
	what := f.path
	if what == "" {
		what = f.dropInDir
	}
	fmt.Fprintf(stdout, "%s: valid (%d files read)\n", what, len(res.Files))
	return 0
}

func configEffective(args []string, stdout, stderr io.Writer) int {
	f := newConfigFlags("effective", stderr, true)
	if err := f.fs.Parse(args); err != nil {
		return 2
	}
	if rest := f.fs.Args(); len(rest) > 0 {
		fmt.Fprintf(stderr, "nodeagent config effective: unexpected arguments %q\n", rest)
		return 2
	}
	o, err := f.options()
	if err != nil {
		fmt.Fprintln(stderr, "nodeagent config effective:", err)
		return 2
	}
	res, ok := loadAndReport(o, stderr)
	if !ok {
		return 1
	}
	_, _ = stdout.Write(config.EffectiveYAML(res))
	return 0
}

// loadAndReport loads the configuration, printing its warnings and, when it
// is invalid, every problem; ok is false then.
func loadAndReport(o config.LoadOptions, stderr io.Writer) (res *config.Result, ok bool) {
	res, err := config.LoadDetailed(o)
	for _, w := range res.Warnings {
		fmt.Fprintln(stderr, "warning:", w)
	}
	if err != nil {
		printLoadError(stderr, err)
		return res, false
	}
	return res, true
}

// printLoadError prints one line per problem.
func printLoadError(w io.Writer, err error) {
	var ce *config.Error
	if errors.As(err, &ce) {
		for _, l := range ce.Lines() {
			fmt.Fprintln(w, "error:", l)
		}
		fmt.Fprintf(w, "configuration is invalid: %d error(s)\n", len(ce.Problems))
		return
	}
	fmt.Fprintln(w, "error:", err)
}
