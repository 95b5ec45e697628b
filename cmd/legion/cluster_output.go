package main

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/client"
	"github.com/legionbsd/legion/compose"
	"go.yaml.in/yaml/v3"
)

func checkOutput(o string) error {
	switch o {
	case "table", "yaml", "json":
		return nil
	}
	return fmt.Errorf("-o %q: expected table, yaml or json", o)
}

// printObjects prints objects as a table, as YAML documents or as JSON
// (one object, or a list as an array).
func printObjects(w io.Writer, output string, objs []legion.Object, withNamespace bool) error {
	switch output {
	case "yaml":
		for i, o := range objs {
			data, err := legion.MarshalYAML(o)
			if err != nil {
				return err
			}
			if i > 0 {
				fmt.Fprintln(w, "---")
			}
			w.Write(data)
		}
		return nil
	case "json":
		var v any = objs
		if len(objs) == 1 {
			v = objs[0]
		}
		data, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(w, "%s\n", data)
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	head, row := genericColumns, genericRow
	if kind, ok := oneKind(objs); ok {
		switch kind {
		case legion.KindService:
			head, row = serviceColumns, serviceRow
		case legion.KindNode:
			head, row = nodeColumns, nodeRow
		}
	}
	if withNamespace {
		fmt.Fprint(tw, "NAMESPACE\t")
	}
	fmt.Fprintln(tw, head)
	for _, o := range objs {
		if withNamespace {
			fmt.Fprintf(tw, "%s\t", orDash(o.GetMetadata().Namespace))
		}
		fmt.Fprintln(tw, row(o))
	}
	return tw.Flush()
}

// oneKind is the kind every object has, if they share one.
func oneKind(objs []legion.Object) (legion.Kind, bool) {
	if len(objs) == 0 {
		return "", false
	}
	k := objs[0].GetKind()
	for _, o := range objs[1:] {
		if o.GetKind() != k {
			return "", false
		}
	}
	return k, true
}

// The tables get prints: per kind where one says more than the metadata,
// as docker service ls and docker node ls do.
const (
	genericColumns = "NAME\tVERSION\tGENERATION\tLABELS"
	serviceColumns = "NAME\tMODE\tREPLICAS\tIMAGE\tPORTS\tUPDATE"
	nodeColumns    = "NAME\tHOSTNAME\tADDRESS\tSTATE\tAVAILABILITY\tROLE"
)

func genericRow(o legion.Object) string {
	m := o.GetMetadata()
	return fmt.Sprintf("%s\t%d\t%d\t%s", m.Name, m.Version, m.Generation, labelString(m.Labels))
}

func serviceRow(o legion.Object) string {
	s := compose.Summarize(o.(*legion.Service))
	return fmt.Sprintf("%s\t%s\t%s\t%s\t%s\t%s", s.Name, s.Mode, s.Replicas, orDash(s.Image), orDash(s.Ports), orDash(s.Update))
}

func nodeRow(o legion.Object) string {
	n := o.(*legion.Node)
	return fmt.Sprintf("%s\t%s\t%s\t%s\t%s\t%s", n.Metadata.Name, orDash(n.Status.Hostname), orDash(n.Status.Addr),
		orDash(string(n.Status.State)), orDash(string(n.Spec.Availability)), orDash(string(n.Spec.Role)))
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func labelString(l map[string]string) string {
	if len(l) == 0 {
		return "<none>"
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(l)) {
		parts = append(parts, k+"="+l[k])
	}
	return strings.Join(parts, ",")
}

// printEvent prints one watch event: a line in a table, a YAML document
// headed by the event, or one JSON object per line.
func printEvent(w io.Writer, output string, e client.Event) error {
	switch output {
	case "yaml":
		data, err := legion.MarshalYAML(e.Object)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(w, "--- # %s %d\n%s", e.Type, e.Version, data)
		return err
	case "json":
		data, err := json.Marshal(struct {
			Type    string        `json:"type"`
			Version uint64        `json:"version"`
			Object  legion.Object `json:"object"`
		}{e.Type, e.Version, e.Object})
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(w, "%s\n", data)
		return err
	}
	m := e.Object.GetMetadata()
	_, err := fmt.Fprintf(w, "%-8s %-6d %s\n", e.Type, e.Version, strings.ToLower(string(e.Object.GetKind()))+"/"+legion.DisplayName(e.Object)+versionNote(m))
	return err
}

func versionNote(m *legion.Metadata) string {
	if m.Generation == 0 {
		return ""
	}
	return fmt.Sprintf(" (generation %d)", m.Generation)
}

// diffView is what diff compares of an object: its labels and spec, as
// YAML.
func diffView(o legion.Object) ([]byte, error) {
	spec, err := json.Marshal(o.SpecPtr())
	if err != nil {
		return nil, err
	}
	var specAny any
	if err := json.Unmarshal(spec, &specAny); err != nil {
		return nil, err
	}
	labels := map[string]string{}
	maps.Copy(labels, o.GetMetadata().Labels)
	return yaml.Marshal(map[string]any{"labels": labels, "spec": specAny})
}
