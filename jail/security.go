package jail

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// The defaults every container jail gets unless its Security loosens them.
const (
	DefaultSecurelevel   = 2
	DefaultEnforceStatfs = 2
	// DevfsRuleset is the devfs ruleset container jails see (devfsrules_jail).
	DevfsRuleset = 4
)

// ErrProfileMismatch is returned when a jail's parameters read back differ
// from what it was created with; the pod is refused.
var ErrProfileMismatch = errors.New("jail parameters differ from the security profile")

// Param is one jail parameter as jail(8) takes it.
type Param struct {
	Name  string
	Value string
}

func (p Param) String() string { return p.Name + "=" + p.Value }

// Validate checks a Security's names and ranges.
func (s Security) Validate() error {
	for i, a := range s.Allow {
		switch a {
		case AllowRawSockets, AllowChflags, AllowMlock, AllowSysvipc:
		default:
			return fmt.Errorf("security.allow[%d] %q: expected rawSockets, chflags, mlock or sysvipc", i, a)
		}
	}
	if s.Securelevel != nil && (*s.Securelevel < -1 || *s.Securelevel > 3) {
		return fmt.Errorf("security.securelevel %d: expected -1 to 3", *s.Securelevel)
	}
	if s.EnforceStatfs != nil && (*s.EnforceStatfs < 1 || *s.EnforceStatfs > 2) {
		return fmt.Errorf("security.enforceStatfs %d: expected 1 or 2", *s.EnforceStatfs)
	}
	return nil
}

func (s Security) allows(what string) bool { return slices.Contains(s.Allow, what) }

func (s Security) securelevel() int {
	if s.Securelevel == nil {
		return DefaultSecurelevel
	}
	return *s.Securelevel
}

func (s Security) enforceStatfs() int {
	if s.EnforceStatfs == nil {
		return DefaultEnforceStatfs
	}
	return *s.EnforceStatfs
}

func boolParam(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

// ContainerParams are the security parameters of a container's jail. A
// container allowing SysV IPC shares its pod's namespace (inherit); a
// standalone one gets its own (new).
func ContainerParams(s Security, inPod bool) []Param {
	sysv := "disable"
	if s.allows(AllowSysvipc) {
		sysv = "new"
		if inPod {
			sysv = "inherit"
		}
	}
	return []Param{
		{"allow.raw_sockets", boolParam(s.allows(AllowRawSockets))},
		{"allow.chflags", boolParam(s.allows(AllowChflags))},
		{"allow.mlock", boolParam(s.allows(AllowMlock))},
		{"allow.mount", "0"},
		{"sysvmsg", sysv},
		{"sysvsem", sysv},
		{"sysvshm", sysv},
		{"enforce_statfs", strconv.Itoa(s.enforceStatfs())},
		{"securelevel", strconv.Itoa(s.securelevel())},
	}
}

// InfraParams are the security parameters of a pod's infra jail: what any
// member asks for, since a child jail may have only what its parent has.
// Its securelevel stays the kernel's default, under which a child may set
// any.
func InfraParams(members []Security) []Param {
	var union Security
	statfs := DefaultEnforceStatfs
	for _, m := range members {
		for _, a := range m.Allow {
			if !union.allows(a) {
				union.Allow = append(union.Allow, a)
			}
		}
		statfs = min(statfs, m.enforceStatfs())
	}
	union.EnforceStatfs = &statfs
	params := ContainerParams(union, false)
	return params[:len(params)-1] // no securelevel
}

// ParamNames returns the names of params, for a read-back.
func ParamNames(params []Param) []string {
	out := make([]string, len(params))
	for i, p := range params {
		out[i] = p.Name
	}
	return out
}

// ParseJLS reads `jls --libxo=json -j NAME param...`: one jail whose values
// are all strings.
func ParseJLS(data []byte) (map[string]string, error) {
	var doc struct {
		Info struct {
			Jail []map[string]any `json:"jail"`
		} `json:"jail-information"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("jls output: %w", err)
	}
	if len(doc.Info.Jail) != 1 {
		return nil, fmt.Errorf("jls output: %d jails, expected one", len(doc.Info.Jail))
	}
	out := map[string]string{}
	for k, v := range doc.Info.Jail[0] {
		switch v := v.(type) {
		case string:
			out[k] = v
		case float64: // tolerated, though jls gives strings
			out[k] = strconv.FormatFloat(v, 'f', -1, 64)
		case bool:
			out[k] = strconv.FormatBool(v)
		default:
			out[k] = fmt.Sprint(v)
		}
	}
	return out, nil
}

// normalise maps the spellings jail(8) and jls use for one value to one:
// booleans to 0/1, jailsys values to disable/new/inherit.
func normalise(name, value string) string {
	v := strings.ToLower(strings.TrimSpace(value))
	switch name {
	case "sysvmsg", "sysvsem", "sysvshm", "vnet":
		switch v {
		case "0":
			return "disable"
		case "1":
			return "new"
		case "2":
			return "inherit"
		}
		return v
	}
	if strings.HasPrefix(name, "allow.") || name == "persist" {
		switch v {
		case "true", "1", "":
			return "1"
		case "false", "0":
			return "0"
		}
	}
	return v
}

// CompareParams returns the differences between what was asked and what a
// jail has, one "name: want X, got Y" per parameter, in the order asked.
func CompareParams(want []Param, got map[string]string) []string {
	var diffs []string
	for _, p := range want {
		g, ok := got[p.Name]
		if !ok {
			diffs = append(diffs, fmt.Sprintf("%s: want %s, missing", p.Name, p.Value))
			continue
		}
		if normalise(p.Name, p.Value) != normalise(p.Name, g) {
			diffs = append(diffs, fmt.Sprintf("%s: want %s, got %s", p.Name, p.Value, g))
		}
	}
	return diffs
}
