package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"unicode/utf8"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/client"
	"github.com/spf13/cobra"
)

// editConflicts is how often edit applies again over writes that changed
// only the object's status (the planner writes a service's all the time)
// before it gives up.
const editConflicts = 5

// editCommand is legion edit, as kubectl edit: the object's manifest
// (labels and spec) in an editor, applied when saved changed.
func (c *clusterCLI) editCommand() *cobra.Command {
	var ns string
	cmd := &cobra.Command{
		Use:   "edit KIND NAME | KIND/NAME",
		Short: "Edit an object's labels and spec in an editor, and apply what is saved",
		Long: `Edit opens an object as a manifest (its kind, name, namespace, labels and
spec) in $LEGION_EDITOR, $KUBE_EDITOR, $VISUAL or $EDITOR (else vi), and
applies the file once the editor exits, as kubectl edit does. A file saved
unchanged, or emptied, changes nothing. A save the cluster refuses (a
field it does not know, a quota, a rename) opens the file again with the
refusal on top: fix it, or save it unchanged to give up. The apply is refused when someone
changed the object's labels or spec meanwhile; writes of its status alone
(a service's, all the time) are not a conflict. When the edit is given up
or refused so, the edited file is kept, and the error names it: fix it and
legion apply -f it.`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			kind, name, err := editTarget(args)
			if err != nil {
				return err
			}
			if !kind.Namespaced() {
				ns = ""
			} else if ns == "" {
				ns = legion.DefaultNamespace
			}
			cl, err := c.connect(cmd)
			if err != nil {
				return err
			}
			defer cl.Close()
			return runEdit(ctxOf(cmd), cl, cmd.OutOrStdout(), kind, ns, name)
		},
	}
	cmd.Flags().StringVarP(&ns, "namespace", "n", "", "namespace of the object (default: default)")
	return cmd
}

// editTarget reads KIND NAME or KIND/NAME.
func editTarget(args []string) (legion.Kind, string, error) {
	var kindArg, name string
	switch {
	case len(args) == 2:
		kindArg, name = args[0], args[1]
	case strings.Contains(args[0], "/"):
		kindArg, name, _ = strings.Cut(args[0], "/")
	default:
		return "", "", fmt.Errorf("edit %s: expected KIND NAME or KIND/NAME", args[0])
	}
	kind, err := resolveKind(kindArg)
	if err != nil {
		return "", "", err
	}
	if name == "" || strings.Contains(name, "/") {
		return "", "", fmt.Errorf("edit: %q: expected the name of a %s", name, kind)
	}
	if kind == legion.KindTask {
		return "", "", errors.New("edit: tasks are written by the cluster only: edit their service or job")
	}
	return kind, name, nil
}

func runEdit(ctx context.Context, cl *client.Client, out io.Writer, kind legion.Kind, ns, name string) error {
	cur, err := cl.Get(ctx, kind, ns, name)
	if err != nil {
		return err
	}
	view, err := editView(cur)
	if err != nil {
		return err
	}
	// The file may hold a Secret's value: a directory of the user's own.
	dir, err := os.MkdirTemp("", "legion-edit-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, strings.ToLower(string(kind))+"-"+name+".yaml")
	shown := view
	var refused error // the last apply's refusal, shown in the file
	for {
		if err := os.WriteFile(path, shown, 0o600); err != nil {
			return err
		}
		if err := runEditor(path); err != nil {
			return err
		}
		edited, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if len(bytes.TrimSpace(stripComments(edited))) == 0 || refused == nil && bytes.Equal(edited, view) {
			fmt.Fprintf(out, "%s unchanged: the edit was cancelled\n", ref(cur))
			return nil
		}
		if refused != nil && bytes.Equal(edited, shown) {
			// Saved again as refused: the user gives up on it here.
			return keptError(refused, path, edited)
		}
		res, err := applyEdit(ctx, cl, cur, edited)
		if err == nil {
			fmt.Fprintf(out, "%s %s\n", ref(res.Object), editOutcome(res.Outcome))
			return nil
		}
		if errors.Is(err, errEditConflict) || errors.Is(err, client.ErrUnreachable) || errors.Is(err, client.ErrOutcomeUnknown) {
			return keptError(err, path, edited)
		}
		// As kubectl does: the file again, the refusal on top, to fix.
		refused = err
		shown = append(refusalHeader(view, err), stripLeadingComments(edited)...)
	}
}

// errEditConflict: the object's labels or spec changed while it was
// being edited.
var errEditConflict = errors.New("its labels or spec changed while it was being edited")

// keptError is err, saying where the edit it refused is kept.
func keptError(err error, path string, edited []byte) error {
	kept, kerr := keepEdit(path, edited)
	if kerr != nil {
		return fmt.Errorf("%w (the edit could not be kept: %v)", err, kerr)
	}
	return fmt.Errorf("%w\nyour edit is kept in %s: fix it, then legion apply -f %s", err, kept, kept)
}

// refusalHeader is the view's header comment with the refusal after it.
func refusalHeader(view []byte, err error) []byte {
	var b bytes.Buffer
	for line := range bytes.Lines(view) {
		if !bytes.HasPrefix(line, []byte("#")) {
			break
		}
		b.Write(line)
	}
	b.WriteString("#\n# The cluster refused the last save; fix it, or save it again unchanged to give up:\n")
	for _, l := range strings.Split(strings.TrimRight(err.Error(), "\n"), "\n") {
		b.WriteString("#   " + l + "\n")
	}
	return b.Bytes()
}

// stripLeadingComments drops the comment lines the file starts with: the
// header, and a refusal shown before.
func stripLeadingComments(data []byte) []byte {
	rest := data
	for line := range bytes.Lines(data) {
		if !bytes.HasPrefix(bytes.TrimSpace(line), []byte("#")) {
			break
		}
		rest = rest[len(line):]
	}
	return rest
}

// editView is the object as a manifest: kind, name, namespace, labels and
// spec, under a header saying what is applied.
func editView(o legion.Object) ([]byte, error) {
	md := o.GetMetadata()
	p := o.SpecPtr()
	switch v := o.(type) {
	case *legion.Config:
		p = textValue(v.Spec)
	case *legion.Secret:
		p = textValue(v.Spec)
	}
	var spec json.RawMessage
	if p != nil {
		var err error
		if spec, err = json.Marshal(p); err != nil {
			return nil, err
		}
	}
	// The fields in the manifests' order, which the YAML keeps.
	view := struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Metadata   struct {
			Name      string            `json:"name"`
			Namespace string            `json:"namespace,omitempty"`
			Labels    map[string]string `json:"labels,omitempty"`
		} `json:"metadata"`
		Spec json.RawMessage `json:"spec,omitempty"`
	}{APIVersion: legion.APIVersion, Kind: string(o.GetKind()), Spec: spec}
	view.Metadata.Name, view.Metadata.Namespace, view.Metadata.Labels = md.Name, md.Namespace, md.Labels
	data, err := json.Marshal(view)
	if err != nil {
		return nil, err
	}
	body, err := legion.JSONToYAML(data)
	if err != nil {
		return nil, err
	}
	header := fmt.Sprintf("# Edit %s, then save and quit to apply it; save it unchanged, or empty, to\n"+
		"# change nothing. Its labels and spec are applied; its name and kind stay.\n", ref(o))
	return append([]byte(header), body...), nil
}

// textValue shows a Config's or Secret's value as text to edit, as
// manifests give it, when it is text; else as its base64 data.
func textValue(s legion.SecretSpec) *legion.SecretSpec {
	if utf8.Valid(s.Data) {
		return &legion.SecretSpec{Text: string(s.Data)}
	}
	return &s
}

// stripComments drops the lines that are comments alone.
func stripComments(data []byte) []byte {
	var out []byte
	for line := range bytes.Lines(data) {
		if !bytes.HasPrefix(bytes.TrimSpace(line), []byte("#")) {
			out = append(out, line...)
		}
	}
	return out
}

// runEditor runs the user's editor on path, on this terminal.
func runEditor(path string) error {
	editor := "vi"
	for _, env := range []string{"LEGION_EDITOR", "KUBE_EDITOR", "VISUAL", "EDITOR"} {
		if v := strings.TrimSpace(os.Getenv(env)); v != "" {
			editor = v
			break
		}
	}
	// Through sh, as git and kubectl do, so EDITOR may carry arguments
	// ("code --wait").
	e := exec.Command("sh", "-c", editor+` "$1"`, "legion-edit", path)
	e.Stdin, e.Stdout, e.Stderr = os.Stdin, os.Stdout, os.Stderr
	if err := e.Run(); err != nil {
		return fmt.Errorf("edit: the editor (%s) failed: %w; nothing was applied", editor, err)
	}
	return nil
}

// applyEdit applies the edited file over cur. A write between the read
// and the apply that changed cur's labels or spec (its generation) is a
// conflict; one of its status alone is applied over.
func applyEdit(ctx context.Context, cl *client.Client, cur legion.Object, data []byte) (client.Result, error) {
	source := "the edit of " + ref(cur)
	objs, err := legion.ParseManifestIn(source, data, cur.GetMetadata().Namespace)
	if err != nil {
		return client.Result{}, err
	}
	if len(objs) != 1 {
		return client.Result{}, fmt.Errorf("%s: expected %s alone, found %d objects", source, ref(cur), len(objs))
	}
	o := objs[0]
	m, want := o.GetMetadata(), cur.GetMetadata()
	if o.GetKind() != cur.GetKind() || m.Name != want.Name || m.Namespace != want.Namespace {
		return client.Result{}, fmt.Errorf("%s: it names %s: edit changes an object, it does not rename or move one (legion apply makes a new one)", source, ref(o))
	}
	opened := want.Generation
	labels := maps.Clone(want.Labels)
	version := want.Version
	for attempt := 1; ; attempt++ {
		res, err := cl.ApplyOne(ctx, o, client.ApplyOptions{ExpectedVersion: &version})
		if !errors.Is(err, client.ErrAborted) || attempt >= editConflicts {
			return res, err
		}
		now, gerr := cl.Get(ctx, cur.GetKind(), want.Namespace, want.Name)
		if gerr != nil {
			return client.Result{}, fmt.Errorf("%w (reading it again: %v)", err, gerr)
		}
		nm := now.GetMetadata()
		if nm.Generation != opened || !maps.Equal(nm.Labels, labels) {
			return client.Result{}, fmt.Errorf("%s: %w (generation %d, now %d): nothing was applied", ref(cur), errEditConflict, opened, nm.Generation)
		}
		version = nm.Version
	}
}

// keepEdit copies an edit that could not be applied out of the temporary
// directory, so it is not lost.
func keepEdit(path string, data []byte) (string, error) {
	f, err := os.CreateTemp("", strings.TrimSuffix(filepath.Base(path), ".yaml")+"-*.yaml")
	if err != nil {
		return "", err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return "", err
	}
	return f.Name(), f.Close()
}

// editOutcome words an apply's outcome for an edit.
func editOutcome(outcome string) string {
	if outcome == client.Unchanged {
		return "unchanged: the edit left it as it was"
	}
	return "edited"
}
