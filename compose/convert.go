package compose

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/legionbsd/legion"
)

// StackLabel is the label every object of a stack carries, valued with
// the stack's name.
const StackLabel = "legion.stack"

// NetworkLabelPrefix begins the label that marks a Service as a member of
// a compose network: legion.network.<network>: "true".
const NetworkLabelPrefix = "legion.network."

// File is one compose file: its name (for messages and to resolve the
// files it names) and its text.
type File struct {
	Name    string
	Content []byte
}

// Options say how to convert.
type Options struct {
	// Stack names the stack; it must be a DNS label.
	Stack string
	// Namespace receives the objects; empty means the stack's name.
	Namespace string
	// Env is the environment ${VAR} reads, as docker stack deploy reads
	// the CLI's (no .env file). Nil means empty.
	Env map[string]string
	// ReadFile reads a file the compose text names (env_file, a secret's or
	// config's file:), as written there; the caller resolves it against the
	// compose file's directory. Nil refuses every such file.
	ReadFile func(name string) ([]byte, error)
	// Strict refuses every setting Legion does not support (the
	// Unsupported warnings) rather than warn.
	Strict bool
	// Dir is the absolute directory relative bind mount sources resolve
	// against: the first compose file's, as compose resolves them. Empty
	// refuses relative bind mounts.
	Dir string
	// Profiles are the active compose profiles: a service naming profiles
	// is deployed only when one of them is active ("*": all), as
	// docker compose does.
	Profiles []string
}

// Warning is something of the compose file Legion does not carry over as
// written, named by the key's path (services.web.privileged). Unsupported
// ones (a setting left out or changed in meaning) are what Strict refuses;
// the others are notes: a name made a DNS label, an unset variable.
type Warning struct {
	Path        string
	Msg         string
	Unsupported bool
}

func (w Warning) String() string {
	if w.Path == "" {
		return w.Msg
	}
	return w.Path + ": " + w.Msg
}

// StrictError is returned in strict mode when the file has anything
// Legion does not map.
type StrictError struct {
	Warnings []Warning
}

func (e *StrictError) Error() string {
	lines := make([]string, 0, len(e.Warnings)+1)
	lines = append(lines, fmt.Sprintf("refused in strict mode: %d unsupported setting(s)", len(e.Warnings)))
	for _, w := range e.Warnings {
		lines = append(lines, "  "+w.String())
	}
	return strings.Join(lines, "\n")
}

// Result is a converted stack: objects in the order apply stores them
// (Secrets, Configs, Volumes, NetworkPolicies, Services, Jobs; by name
// within a kind), each already through admission, and the warnings.
type Result struct {
	Objects  []legion.Object
	Warnings []Warning
	// Namespace is the namespace the stack asks for, admitted, for stack
	// deploy to create when it does not exist yet: locked when the
	// compose networks segment the services, allowing what the
	// containers loosen (cap_add NET_RAW). It is not among Objects:
	// namespaces are the cluster admin's, and convert's output must apply
	// without that right.
	Namespace *legion.Namespace
}

// Convert reads compose files (later ones override earlier ones, as with
// several -c flags) and converts them to Legion objects that pass
// admission. With opts.Strict, any unsupported setting makes it fail with
// a *StrictError.
func Convert(ctx context.Context, files []File, opts Options) (*Result, error) {
	if err := legion.ValidName(opts.Stack); err != nil {
		return nil, fmt.Errorf("stack name: %v", err)
	}
	ns := opts.Namespace
	if ns == "" {
		ns = opts.Stack
	}
	if err := legion.ValidName(ns); err != nil {
		return nil, fmt.Errorf("namespace: %v", err)
	}
	if len(files) == 0 {
		return nil, errors.New("no compose file given")
	}
	c := &converter{opts: opts, ns: ns, seen: map[string]bool{}}
	// The scan parses each file first: it also refuses what compose-go's
	// YAML reader would not come back from (an anchor holding an alias
	// of itself makes it loop).
	for _, f := range files {
		if err := c.scan(f); err != nil {
			return nil, err
		}
	}
	c.warnUnmapped()
	project, err := c.load(ctx, files)
	if err != nil {
		return nil, err
	}
	objs, err := c.convert(project)
	if err != nil {
		return nil, err
	}
	c.noteHostPaths()
	// By path, so the same file always warns in the same order.
	slices.SortStableFunc(c.warnings, func(a, b Warning) int { return strings.Compare(a.Path, b.Path) })
	want, err := c.namespace(objs)
	if err != nil {
		return nil, err
	}
	res := &Result{Objects: objs, Warnings: c.warnings, Namespace: want}
	if opts.Strict {
		var refused []Warning
		for _, w := range c.warnings {
			if w.Unsupported {
				refused = append(refused, w)
			}
		}
		if len(refused) > 0 {
			return res, &StrictError{Warnings: refused}
		}
	}
	return res, nil
}

// converter holds one conversion's state.
type converter struct {
	opts      Options
	ns        string
	warnings  []Warning
	seen      map[string]bool
	segmented bool // the compose networks separate some services

	scanService  string              // the service the scan is in: services.<key>
	unmappedKeys map[string][]string // by services.<key>: its keys Legion does not map

	hostPathServices []string // the services whose bind mounts became hostPath volumes
}

// namespace builds the Namespace the converted objects ask for.
func (c *converter) namespace(objs []legion.Object) (*legion.Namespace, error) {
	n := &legion.Namespace{Header: legion.Header{APIVersion: legion.APIVersion, Kind: legion.KindNamespace,
		Metadata: legion.Metadata{Name: c.ns, Labels: c.stackLabels()}}}
	if c.segmented {
		n.Spec.Isolation = legion.IsolationLocked
	}
	for _, o := range objs {
		if pod := legion.PodOf(o); pod != nil {
			for _, ctr := range pod.AllContainers() {
				n.Spec.Security.Allow = append(n.Spec.Security.Allow, ctr.Security.Allow...)
			}
		}
	}
	if err := legion.Admit(n); err != nil {
		return nil, fmt.Errorf("namespace %s does not pass admission: %w", c.ns, err)
	}
	return n, nil
}

// warn records a setting Legion does not support; Strict refuses it.
func (c *converter) warn(path, format string, args ...any) {
	c.add(Warning{Path: path, Msg: fmt.Sprintf(format, args...), Unsupported: true})
}

// note records a change Strict accepts (a rename, an unset variable).
func (c *converter) note(path, format string, args ...any) {
	c.add(Warning{Path: path, Msg: fmt.Sprintf(format, args...)})
}

func (c *converter) add(w Warning) {
	if w.Msg == "not supported, ignored" && c.inUnmapped(w.Path) {
		return // the service's one line already lists it
	}
	if key := w.String(); !c.seen[key] {
		c.seen[key] = true
		c.warnings = append(c.warnings, w)
	}
}

// inUnmapped reports whether the scan listed path among its service's
// unmapped keys.
func (c *converter) inUnmapped(path string) bool {
	for svc, keys := range c.unmappedKeys {
		if rel, ok := strings.CutPrefix(path, svc+"."); ok && slices.Contains(keys, rel) {
			return true
		}
	}
	return false
}

// stackLabels are the labels of every object of the stack.
func (c *converter) stackLabels() map[string]string {
	return map[string]string{StackLabel: c.opts.Stack}
}

func (c *converter) header(kind legion.Kind, name string, labels map[string]string) legion.Header {
	return legion.Header{APIVersion: legion.APIVersion, Kind: kind, Metadata: legion.Metadata{Name: name, Namespace: c.ns, Labels: labels}}
}

// sortObjects puts objects in apply order, by name within a kind.
func sortObjects(objs []legion.Object) {
	rank := map[legion.Kind]int{}
	for i, k := range legion.Kinds() {
		rank[k] = i
	}
	slices.SortStableFunc(objs, func(a, b legion.Object) int {
		if d := rank[a.GetKind()] - rank[b.GetKind()]; d != 0 {
			return d
		}
		return strings.Compare(a.GetMetadata().Name, b.GetMetadata().Name)
	})
}

// Render writes objects as the native multi-document YAML that
// `legion validate` and `legion apply` read.
func Render(objs []legion.Object) ([]byte, error) {
	var b strings.Builder
	for i, o := range objs {
		data, err := legion.MarshalYAML(o)
		if err != nil {
			return nil, fmt.Errorf("rendering %s %s: %w", o.GetKind(), legion.DisplayName(o), err)
		}
		if i > 0 {
			b.WriteString("---\n")
		}
		b.Write(data)
	}
	return []byte(b.String()), nil
}
