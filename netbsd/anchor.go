package netbsd

import (
	"fmt"
	"hash/fnv"
	"net/netip"
	"slices"
	"strings"

	"github.com/legionbsd/legion/sys"
)

// Legion's anchors. pf.conf belongs to the operator and calls them with
// nat-anchor, rdr-anchor and anchor "legion/*"; Legion loads a main
// ruleset (MainRuleset) only when asked to (--pf-main) and the host's is
// empty.
const (
	AnchorServices = "legion/svc"
	AnchorPolicy   = "legion/policy"
)

// Table is a pf table and its addresses, sorted (IPv4 first).
type Table struct {
	Name  string
	Addrs []netip.Addr
}

// Anchor is a rendered anchor: rules apart from table contents, so that a
// membership change is a table update and never a rule reload.
type Anchor struct {
	Path   string
	Rules  string  // rules and comments, no table declarations
	Tables []Table // every table the rules use, sorted by name
}

// Text is what `pfctl -a Path -f -` loads: the tables with their current
// contents (a reload defines them anew, emptied ones included) and the
// rules.
func (a Anchor) Text() string {
	var b strings.Builder
	n := len(a.Rules)
	for _, t := range a.Tables {
		n += len(t.Name) + 24 + 20*len(t.Addrs)
	}
	b.Grow(n)
	for _, t := range a.Tables {
		b.WriteString("table <")
		b.WriteString(t.Name)
		// Always with a list, { } when empty: pf.conf(5) leaves a table
		// that exists and is defined without one as it was.
		b.WriteString("> persist {")
		for _, ad := range t.Addrs {
			b.WriteByte(' ')
			b.WriteString(ad.String())
		}
		b.WriteString(" }\n")
	}
	b.WriteString(a.Rules)
	return b.String()
}

// Loaded is what an applier last loaded into an anchor.
type Loaded struct {
	Rules  string
	Tables map[string][]netip.Addr
}

// AnchorPlan is how to bring an anchor from what is loaded to what was
// rendered.
type AnchorPlan struct {
	Cmds          []sys.Cmd
	RulesChanged  bool     // the anchor is reloaded
	TablesChanged []string // tables whose contents change, sorted
}

// PlanAnchor compares what is loaded (nil: unknown, as after an agent
// restart) with what was rendered. Rules that differ reload the whole
// anchor (tables included, with their contents); otherwise only the tables
// whose contents differ are replaced.
func PlanAnchor(prev *Loaded, next Anchor) AnchorPlan {
	var p AnchorPlan
	for _, t := range next.Tables {
		if prev == nil || !slices.Equal(prev.Tables[t.Name], t.Addrs) {
			p.TablesChanged = append(p.TablesChanged, t.Name)
		}
	}
	if prev == nil || prev.Rules != next.Rules {
		p.RulesChanged = true
		p.Cmds = append(p.Cmds, sys.Cmd{Name: "pfctl", Args: []string{"-a", next.Path, "-f", "-"}, Stdin: []byte(next.Text())})
		if prev != nil {
			keep := make(map[string]bool, len(next.Tables))
			for _, t := range next.Tables {
				keep[t.Name] = true
			}
			var gone []string
			for name := range prev.Tables {
				if !keep[name] {
					gone = append(gone, name)
				}
			}
			slices.Sort(gone)
			for _, name := range gone {
				p.Cmds = append(p.Cmds, sys.Command("pfctl", "-a", next.Path, "-t", name, "-T", "kill"))
			}
		}
		return p
	}
	byName := make(map[string][]netip.Addr, len(next.Tables))
	for _, t := range next.Tables {
		byName[t.Name] = t.Addrs
	}
	for _, name := range p.TablesChanged {
		p.Cmds = append(p.Cmds, tableReplace(next.Path, name, byName[name]))
	}
	return p
}

// tableReplace sets a table's contents; with no addresses it empties the
// table (lab fact).
func tableReplace(anchor, table string, addrs []netip.Addr) sys.Cmd {
	args := make([]string, 0, 6+len(addrs))
	args = append(args, "-a", anchor, "-t", table, "-T", "replace")
	for _, a := range addrs {
		args = append(args, a.String())
	}
	return sys.Command("pfctl", args...)
}

// pf table names hold at most 31 characters.
const maxTableName = 31

// tableName names a table prefix+ns+"_"+name when that fits and is plain;
// otherwise it keeps a readable start and adds a hash, so distinct services
// never share a table.
func tableName(prefix, ns, name string) string {
	key := ns
	if name != "" {
		key = ns + "_" + name
	}
	plain := true
	for i := 0; i < len(key); i++ {
		c := key[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			plain = false
			break
		}
	}
	if plain && len(prefix)+len(key) <= maxTableName {
		return prefix + key
	}
	h := fnv.New32a()
	h.Write([]byte(ns + "/" + name))
	suffix := fmt.Sprintf("_%08x", h.Sum32())
	keep := maxTableName - len(prefix) - len(suffix)
	start := make([]byte, 0, keep)
	for i := 0; i < len(key) && len(start) < keep; i++ {
		c := key[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			c = '_'
		}
		start = append(start, c)
	}
	return prefix + string(start) + suffix
}

// sortAddrs sorts and removes duplicates.
func sortAddrs(a []netip.Addr) []netip.Addr {
	slices.SortFunc(a, func(x, y netip.Addr) int { return x.Compare(y) })
	return slices.Compact(a)
}
