package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/client"
	"github.com/spf13/cobra"
	"github.com/spf13/viper"
	"go.yaml.in/yaml/v3"
)

// The CLI's own settings file holds named contexts, each saying which
// cluster to call and as whom, and which of them is current. A flag wins
// over its environment variable, which wins over the current context,
// which wins over the built-in default.

// cliConfig is the file's content. Contexts are a list, not a map keyed
// by name: viper folds map keys to lower case, and a context's name is
// the user's to spell.
type cliConfig struct {
	CurrentContext string       `mapstructure:"current-context" yaml:"current-context,omitempty"`
	Contexts       []cliContext `mapstructure:"contexts" yaml:"contexts"`
}

// cliContext is one cluster as one user reaches it.
type cliContext struct {
	Name        string `mapstructure:"name" yaml:"name" json:"name"`
	Server      string `mapstructure:"server" yaml:"server,omitempty" json:"server,omitempty"`
	Credentials string `mapstructure:"credentials" yaml:"credentials,omitempty" json:"credentials,omitempty"`
	Namespace   string `mapstructure:"namespace" yaml:"namespace,omitempty" json:"namespace,omitempty"`
	// RequestTimeout is a Go duration ("45s"), as --request-timeout.
	RequestTimeout string `mapstructure:"request-timeout" yaml:"request-timeout,omitempty" json:"requestTimeout,omitempty"`
}

func (c *cliConfig) find(name string) *cliContext {
	for i := range c.Contexts {
		if c.Contexts[i].Name == name {
			return &c.Contexts[i]
		}
	}
	return nil
}

// Environment variables of the settings the contexts hold.
const (
	envConfig         = "LEGION_CONFIG"
	envContext        = "LEGION_CONTEXT"
	envServer         = "LEGION_SERVER"
	envCredentials    = "LEGION_CREDENTIALS"
	envNamespace      = "LEGION_NAMESPACE"
	envRequestTimeout = "LEGION_REQUEST_TIMEOUT"
)

// configFlags puts --config and --context on the root.
func configFlags(root *cobra.Command) {
	pf := root.PersistentFlags()
	pf.String("config", "", "the CLI's settings file, or none for no file (env "+envConfig+"; default $XDG_CONFIG_HOME/legion/config.yaml, else ~/.config/legion/config.yaml)")
	pf.String("context", "", "the context of the settings file to use instead of its current one (env "+envContext+")")
	root.PersistentPreRunE = loadSettings
}

// noConfig, as --config or LEGION_CONFIG, means no settings file: none
// is read and init and up write none (scripts, tests).
const noConfig = "none"

// configPath is the settings file in effect ("" for none).
func configPath(cmd *cobra.Command) (string, error) {
	p := os.Getenv(envConfig)
	if f := cmd.Flags().Lookup("config"); f != nil && f.Changed {
		p = f.Value.String()
	}
	if p == noConfig {
		return "", nil
	}
	if p != "" {
		return p, nil
	}
	if d := os.Getenv("XDG_CONFIG_HOME"); d != "" {
		return filepath.Join(d, "legion", "config.yaml"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("settings file: no home directory (set %s or pass --config): %w", envConfig, err)
	}
	return filepath.Join(home, ".config", "legion", "config.yaml"), nil
}

// readConfig reads the settings file through viper; a missing file is an
// empty one.
func readConfig(path string) (*cliConfig, error) {
	cfg := &cliConfig{}
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return cfg, nil
	}
	v := viper.New()
	v.SetConfigFile(path)
	v.SetConfigType("yaml")
	if err := v.ReadInConfig(); err != nil {
		return nil, fmt.Errorf("settings file %s: %w", path, err)
	}
	if err := v.Unmarshal(cfg); err != nil {
		return nil, fmt.Errorf("settings file %s: %w", path, err)
	}
	seen := map[string]bool{}
	for _, c := range cfg.Contexts {
		switch {
		case c.Name == "":
			return nil, fmt.Errorf("settings file %s: a context has no name", path)
		case seen[c.Name]:
			return nil, fmt.Errorf("settings file %s: context %q appears twice", path, c.Name)
		}
		seen[c.Name] = true
		if c.RequestTimeout != "" {
			if _, err := time.ParseDuration(c.RequestTimeout); err != nil {
				return nil, fmt.Errorf("settings file %s: context %q: request-timeout: %w", path, c.Name, err)
			}
		}
	}
	return cfg, nil
}

// writeConfig replaces the settings file whole, readable by its owner
// only: it names credentials.
func writeConfig(path string, cfg *cliConfig) error {
	data, err := yaml.Marshal(cfg)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("settings file %s: %w", path, err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".config-*.yaml")
	if err != nil {
		return fmt.Errorf("settings file %s: %w", path, err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("settings file %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("settings file %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("settings file %s: %w", path, err)
	}
	return nil
}

// settings is what a command runs with, once loaded: the file, and the
// context chosen from it (nil when none).
type settings struct {
	path    string
	context *cliContext
}

type settingsKey struct{}

// loadSettings reads the settings file before any command runs, so a
// broken file or an unknown context is said before anything is called.
// The daemon and the commands it starts read no settings file.
func loadSettings(cmd *cobra.Command, _ []string) error {
	top := cmd
	for top.HasParent() && top.Parent().HasParent() {
		top = top.Parent()
	}
	if top.Name() == "daemon" || top.Name() == "node-resolver" {
		return nil
	}
	path, err := configPath(cmd)
	if err != nil || path == "" {
		return err
	}
	cfg, err := readConfig(path)
	if err != nil {
		return err
	}
	s := &settings{path: path}
	name, from := cfg.CurrentContext, "current-context"
	if f := cmd.Flags().Lookup("context"); f != nil && f.Changed {
		name, from = f.Value.String(), "--context"
	} else if e := os.Getenv(envContext); e != "" {
		name, from = e, envContext
	}
	if name != "" {
		if s.context = cfg.find(name); s.context == nil {
			return fmt.Errorf("context %q (%s): not in %s (legion context ls)", name, from, path)
		}
	}
	cmd.SetContext(context.WithValue(ctxOf(cmd), settingsKey{}, s))
	return applyNamespace(cmd, s.context)
}

// settingsOf is what loadSettings found (empty when it did not run).
func settingsOf(cmd *cobra.Command) *settings {
	if ctx := cmd.Context(); ctx != nil {
		if s, ok := ctx.Value(settingsKey{}).(*settings); ok {
			return s
		}
	}
	return &settings{}
}

// contextValue is a setting of the context in effect ("" without one).
func contextValue(cmd *cobra.Command, get func(*cliContext) string) string {
	if c := settingsOf(cmd).context; c != nil {
		return get(c)
	}
	return ""
}

// pick is a setting's value: the flag when given, else the environment,
// else the context, else the default.
func pick(flag string, flagGiven bool, env, ctx, def string) string {
	switch {
	case flagGiven:
		return flag
	case env != "":
		return env
	case ctx != "":
		return ctx
	}
	return def
}

// flagValue is a flag's value and whether the user gave it.
func flagValue(cmd *cobra.Command, name string) (string, bool) {
	if f := cmd.Flags().Lookup(name); f != nil {
		return f.Value.String(), f.Changed
	}
	return "", false
}

// serverSetting is the manager address in effect.
func serverSetting(cmd *cobra.Command) string {
	v, given := flagValue(cmd, "server")
	return pick(v, given, os.Getenv(envServer), contextValue(cmd, func(c *cliContext) string { return c.Server }), client.DefaultServer)
}

// contextUnreachable adds, to a failure to reach any manager at a
// context's address, which context that is: the user gave no address,
// and a context legion up added lasts only while legion up runs.
func contextUnreachable(cmd *cobra.Command, err error) error {
	if cmd == nil || !errors.Is(err, client.ErrUnreachable) {
		return err
	}
	s := settingsOf(cmd)
	if _, given := flagValue(cmd, "server"); given || os.Getenv(envServer) != "" || s.context == nil || s.context.Server == "" {
		return err
	}
	return fmt.Errorf("%w; the address is context %s's (%s): if legion up made it, it answers only while legion up runs; legion context ls lists the others",
		err, s.context.Name, s.path)
}

// credentialsSetting is the credentials file in effect ("" for none).
func credentialsSetting(cmd *cobra.Command) string {
	v, given := flagValue(cmd, "credentials")
	return pick(v, given, os.Getenv(envCredentials), contextValue(cmd, func(c *cliContext) string { return c.Credentials }), "")
}

// requestTimeoutSetting is the wait in effect; zero leaves the client's
// defaults.
func requestTimeoutSetting(cmd *cobra.Command) (time.Duration, error) {
	v, given := flagValue(cmd, "request-timeout")
	s := pick(v, given, os.Getenv(envRequestTimeout), contextValue(cmd, func(c *cliContext) string { return c.RequestTimeout }), "")
	if s == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("request timeout %q: %w", s, err)
	}
	return d, nil
}

// applyNamespace gives a command's --namespace, when the user did not
// pass it, the namespace of LEGION_NAMESPACE or of the context. Only the
// flags whose default is the default namespace take it: where an empty
// flag means all namespaces or the stack's own, that meaning stays.
func applyNamespace(cmd *cobra.Command, c *cliContext) error {
	f := cmd.Flags().Lookup("namespace")
	if f == nil || f.Changed {
		return nil
	}
	if f.DefValue != legion.DefaultNamespace && !strings.Contains(f.Usage, "(default: "+legion.DefaultNamespace+")") {
		return nil
	}
	ns := os.Getenv(envNamespace)
	if ns == "" && c != nil {
		ns = c.Namespace
	}
	if ns == "" {
		return nil
	}
	return f.Value.Set(ns)
}

func newContextCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "context",
		Short: "List, choose and edit the clusters this CLI knows (its settings file)",
		Long: `A context names a cluster as you reach it: a manager's address, your
credentials file, a namespace and a request timeout. The current context
supplies what --server, --credentials, --namespace and --request-timeout
(or LEGION_SERVER, LEGION_CREDENTIALS, LEGION_NAMESPACE and
LEGION_REQUEST_TIMEOUT) do not say. legion init and legion up add one for
the cluster they make. The file is $XDG_CONFIG_HOME/legion/config.yaml
(~/.config/legion/config.yaml), or --config / LEGION_CONFIG.`,
	}
	cmd.AddCommand(contextLsCommand(), contextUseCommand(), contextShowCommand(), contextSetCommand(), contextRmCommand())
	return cmd
}

// editConfig reads the settings file, lets change alter it and writes it
// back when change says so.
func editConfig(cmd *cobra.Command, change func(*cliConfig) (bool, error)) error {
	path := settingsOf(cmd).path
	if path == "" {
		var err error
		if path, err = configPath(cmd); err != nil {
			return err
		}
		if path == "" {
			return fmt.Errorf("no settings file: --config or %s is %s", envConfig, noConfig)
		}
	}
	cfg, err := readConfig(path)
	if err != nil {
		return err
	}
	write, err := change(cfg)
	if err != nil || !write {
		return err
	}
	return writeConfig(path, cfg)
}

func contextLsCommand() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:     "ls",
		Aliases: []string{"list"},
		Short:   "List the contexts; * marks the current one",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			fm, err := parseOutput(output)
			if err != nil {
				return err
			}
			return editConfig(cmd, func(cfg *cliConfig) (bool, error) {
				l := contextListing(cfg)
				return false, l.print(cmd.OutOrStdout(), cmd.ErrOrStderr(), fm)
			})
		},
	}
	outputFlag(cmd, &output)
	return cmd
}

// contextListing is context ls in every format: the table marks the
// current context, -o json prints each with current: true|false.
func contextListing(cfg *cliConfig) listing {
	type view struct {
		cliContext
		Current bool `json:"current"`
	}
	l := listing{columns: cols("CURRENT", "NAME", "SERVER", "CREDENTIALS", "NAMESPACE"), none: "contexts"}
	for _, c := range cfg.Contexts {
		mark := ""
		if c.Name == cfg.CurrentContext {
			mark = "*"
		}
		l.add("context/"+c.Name, view{c, mark == "*"}, mark, c.Name, c.Server, c.Credentials, c.Namespace)
	}
	return l
}

func contextUseCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "use NAME",
		Short: "Make a context the current one",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return editConfig(cmd, func(cfg *cliConfig) (bool, error) {
				if cfg.find(args[0]) == nil {
					return false, fmt.Errorf("context %q: not in %s (legion context ls)", args[0], settingsOf(cmd).path)
				}
				cfg.CurrentContext = args[0]
				fmt.Fprintf(cmd.OutOrStdout(), "context/%s in use\n", args[0])
				return true, nil
			})
		},
	}
}

func contextShowCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "show",
		Short: "Show the settings in effect and where each comes from",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			s := settingsOf(cmd)
			out := cmd.OutOrStdout()
			name := "none"
			if s.context != nil {
				name = s.context.Name
			}
			fmt.Fprintf(out, "Settings file:   %s\n", s.path)
			fmt.Fprintf(out, "Context:         %s\n", name)
			show := func(label, flag, env string, ctx func(*cliContext) string, def string) {
				v, given := flagValue(cmd, flag)
				from := "default"
				switch {
				case given:
					from = "--" + flag
				case os.Getenv(env) != "":
					from = env
				case contextValue(cmd, ctx) != "":
					from = "context"
				}
				val := pick(v, given, os.Getenv(env), contextValue(cmd, ctx), def)
				if val == "" {
					val = "none"
				}
				fmt.Fprintf(out, "%-17s%s (%s)\n", label+":", val, from)
			}
			show("Server", "server", envServer, func(c *cliContext) string { return c.Server }, client.DefaultServer)
			show("Credentials", "credentials", envCredentials, func(c *cliContext) string { return c.Credentials }, "")
			show("Namespace", "namespace", envNamespace, func(c *cliContext) string { return c.Namespace }, legion.DefaultNamespace)
			show("Request timeout", "request-timeout", envRequestTimeout, func(c *cliContext) string { return c.RequestTimeout }, "")
			return nil
		},
	}
}

func contextSetCommand() *cobra.Command {
	var namespace, timeout string
	cmd := &cobra.Command{
		Use:   "set NAME [--server ADDR] [--credentials FILE] [--namespace NS] [--request-timeout D]",
		Short: "Add a context or change what it says (only the flags given)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			return editConfig(cmd, func(cfg *cliConfig) (bool, error) {
				c := cfg.find(name)
				outcome := "unchanged"
				if c == nil {
					cfg.Contexts = append(cfg.Contexts, cliContext{Name: name})
					c, outcome = &cfg.Contexts[len(cfg.Contexts)-1], "created"
				}
				before := *c
				if v, given := flagValue(cmd, "server"); given {
					c.Server = v
				}
				if v, given := flagValue(cmd, "credentials"); given {
					c.Credentials = v
					if v != "" {
						abs, err := filepath.Abs(v)
						if err != nil {
							return false, fmt.Errorf("credentials %q: %w", v, err)
						}
						c.Credentials = abs
					}
				}
				if cmd.Flags().Changed("namespace") {
					c.Namespace = namespace
				}
				if cmd.Flags().Changed("request-timeout") {
					if timeout != "" {
						if _, err := time.ParseDuration(timeout); err != nil {
							return false, fmt.Errorf("--request-timeout %q: %w", timeout, err)
						}
					}
					c.RequestTimeout = timeout
				}
				if outcome == "unchanged" && *c != before {
					outcome = "updated"
				}
				if len(cfg.Contexts) == 1 && cfg.CurrentContext == "" {
					cfg.CurrentContext = name
				}
				fmt.Fprintf(cmd.OutOrStdout(), "context/%s %s\n", name, outcome)
				return outcome != "unchanged", nil
			})
		},
	}
	cmd.Flags().StringVarP(&namespace, "namespace", "n", "", "the namespace commands use when not given -n (empty: default)")
	// The root's --request-timeout is a duration; here the text is kept as
	// written, so an empty one can clear the context's.
	cmd.Flags().StringVar(&timeout, "request-timeout", "", "the context's request timeout (a Go duration; empty clears it)")
	return cmd
}

func contextRmCommand() *cobra.Command {
	return &cobra.Command{
		Use:     "rm NAME",
		Aliases: []string{"delete"},
		Short:   "Remove a context (not the cluster, nor its credentials)",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return editConfig(cmd, func(cfg *cliConfig) (bool, error) {
				i := slices.IndexFunc(cfg.Contexts, func(c cliContext) bool { return c.Name == args[0] })
				if i < 0 {
					return false, fmt.Errorf("context %q: not in %s (legion context ls)", args[0], settingsOf(cmd).path)
				}
				cfg.Contexts = slices.Delete(cfg.Contexts, i, i+1)
				if cfg.CurrentContext == args[0] {
					cfg.CurrentContext = ""
				}
				fmt.Fprintf(cmd.OutOrStdout(), "context/%s deleted\n", args[0])
				return true, nil
			})
		},
	}
}

// rememberCluster adds or updates, in the settings file, a context for a
// cluster this CLI just made (legion init, legion up) and makes it
// current, returning the line that says so ("" with no settings file). A
// context of that name that holds another cluster's credentials is left
// alone: the new one gets a numbered name.
func rememberCluster(cmd *cobra.Command, name, server, credentials string) (string, error) {
	if p, err := configPath(cmd); err != nil || p == "" {
		return "", err
	}
	abs, err := filepath.Abs(credentials)
	if err != nil {
		return "", fmt.Errorf("credentials %q: %w", credentials, err)
	}
	name = contextName(name)
	var line string
	err = editConfig(cmd, func(cfg *cliConfig) (bool, error) {
		chosen, outcome := name, "added"
		for i := 2; ; i++ {
			c := cfg.find(chosen)
			if c == nil {
				cfg.Contexts = append(cfg.Contexts, cliContext{Name: chosen, Server: server, Credentials: abs})
				break
			}
			if c.Credentials == abs {
				c.Server, outcome = server, "updated"
				break
			}
			chosen = fmt.Sprintf("%s-%d", name, i)
		}
		cfg.CurrentContext = chosen
		line = fmt.Sprintf("Context %s %s and in use (%s): legion commands here reach this cluster.", chosen, outcome, settingsOf(cmd).pathOr(cmd))
		return true, nil
	})
	return line, err
}

func (s *settings) pathOr(cmd *cobra.Command) string {
	if s.path != "" {
		return s.path
	}
	p, _ := configPath(cmd)
	return p
}

// clusterDirOf is the data directory of the manager whose admin
// credentials are at admin (DATA-DIR/manager/admin.pem).
func clusterDirOf(admin string) string {
	dir := filepath.Dir(admin)
	if filepath.Base(dir) == "manager" {
		dir = filepath.Dir(dir)
	}
	return dir
}

// contextName makes a context name from a directory's: a hidden data
// directory (.legion) is named after the directory holding it.
func contextName(dir string) string {
	abs, err := filepath.Abs(dir)
	if err != nil {
		abs = dir
	}
	base := filepath.Base(abs)
	if strings.HasPrefix(base, ".") {
		base = filepath.Base(filepath.Dir(abs))
	}
	base = strings.Map(func(r rune) rune {
		if r == '/' || r == ' ' || r == '\t' {
			return '-'
		}
		return r
	}, strings.Trim(base, "."))
	if base == "" || base == "-" {
		return "legion"
	}
	return base
}
