package legion

import (
	"fmt"
	"strconv"
	"strings"
)

// Constraint is a parsed placement constraint: a node attribute compared
// with a value by == or !=.
type Constraint struct {
	Attr  string // node.labels.<key>, node.name, node.hostname, node.role, node.platform.os|arch|linux
	Key   string // the label key, for node.labels.<key>
	Equal bool   // == (true) or != (false)
	Value string
}

// constraintAttrs are the attributes besides node.labels.<key>.
var constraintAttrs = []string{"node.name", "node.hostname", "node.role", "node.platform.os", "node.platform.arch", "node.platform.linux"}

const labelsPrefix = "node.labels."

// ParseConstraint reads "attribute == value" or "attribute != value".
func ParseConstraint(s string) (Constraint, error) {
	var c Constraint
	lhs, rhs, ok := strings.Cut(s, "==")
	c.Equal = true
	if !ok {
		lhs, rhs, ok = strings.Cut(s, "!=")
		c.Equal = false
	}
	if !ok {
		return c, fmt.Errorf("constraint %q: expected <attribute> == <value> or <attribute> != <value>", s)
	}
	lhs, rhs = strings.TrimSpace(lhs), strings.TrimSpace(rhs)
	if strings.ContainsAny(rhs, "=!") {
		return c, fmt.Errorf("constraint %q: expected one comparison", s)
	}
	if rhs == "" {
		return c, fmt.Errorf("constraint %q: missing value after the operator", s)
	}
	if strings.ContainsAny(rhs, " \t\n") {
		return c, fmt.Errorf("constraint %q: the value must not contain spaces", s)
	}
	switch {
	case strings.HasPrefix(lhs, labelsPrefix):
		c.Attr, c.Key = "node.labels", lhs[len(labelsPrefix):]
		if err := validLabelKey(c.Key); err != nil {
			return c, fmt.Errorf("constraint %q: label key %v", s, err)
		}
	case contains(constraintAttrs, lhs):
		c.Attr = lhs
	default:
		return c, fmt.Errorf("constraint %q: unknown attribute %q: expected node.labels.<key>, %s", s, lhs, strings.Join(constraintAttrs, ", "))
	}
	c.Value = rhs
	switch c.Attr {
	case "node.role":
		if rhs != string(RoleManager) && rhs != string(RoleWorker) {
			return c, fmt.Errorf("constraint %q: node.role is manager or worker", s)
		}
	case "node.platform.linux":
		b, err := strconv.ParseBool(rhs)
		if err != nil {
			return c, fmt.Errorf("constraint %q: node.platform.linux is true or false", s)
		}
		c.Value = strconv.FormatBool(b)
	}
	return c, nil
}

// String renders the constraint in canonical form.
func (c Constraint) String() string {
	attr := c.Attr
	if attr == "node.labels" {
		attr = labelsPrefix + c.Key
	}
	op := "=="
	if !c.Equal {
		op = "!="
	}
	return attr + " " + op + " " + c.Value
}

// Eval reports whether a node satisfies the constraint. A label the node
// lacks is unequal to every value.
func (c Constraint) Eval(n *Node) bool {
	var have string
	present := true
	switch c.Attr {
	case "node.labels":
		have, present = n.Metadata.Labels[c.Key]
	case "node.name":
		have = n.Metadata.Name
	case "node.hostname":
		have = n.Status.Hostname
	case "node.role":
		have = string(n.Spec.Role)
	case "node.platform.os":
		have = n.Status.Platform.OS
	case "node.platform.arch":
		have = n.Status.Platform.Arch
	case "node.platform.linux":
		have = strconv.FormatBool(n.Status.Platform.Linux)
	}
	return (present && have == c.Value) == c.Equal
}

// ParseConstraints reads a list of constraints.
func ParseConstraints(list []string) ([]Constraint, error) {
	out := make([]Constraint, 0, len(list))
	for _, s := range list {
		c, err := ParseConstraint(s)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
