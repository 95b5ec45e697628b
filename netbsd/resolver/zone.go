package resolver

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// Domain is the zone every cluster name lives under.
const Domain = "legion."

// Zone is what the resolver answers for: fully qualified, lower-case names
// under Domain and their addresses. It is the zone file's content.
type Zone struct {
	Records map[string]Record `json:"records"`
}

// Record is the addresses of one name.
type Record struct {
	A    []string `json:"a,omitempty"`
	AAAA []string `json:"aaaa,omitempty"`
}

// Service is one service (or Job) as the endpoints stream describes it.
type Service struct {
	Namespace string
	Name      string
	VIP       string // empty for dnsrr services and Jobs
	DNSRR     bool
	Stateful  bool
	Tasks     []Task
}

// Task is one task of a service with an address.
type Task struct {
	IP      string
	Ready   bool
	Ordinal int // stateful services: the task's ordinal
}

// Twin gives an address's IPv6 twin (5.7); nil means no AAAA records.
type Twin func(netip.Addr) (netip.Addr, bool)

// BuildZone computes the zone for the given services: <svc>.<ns>.legion.
// (the VIP, or the ready tasks' addresses for dnsrr), tasks.<svc>.<ns>.legion.
// (every ready task) and, for stateful services, <svc>-<n>.<svc>.<ns>.legion.
// (ordinal n, once ready). Addresses are sorted, so the same endpoints
// always give the same file.
func BuildZone(services []Service, twin Twin) Zone {
	z := Zone{Records: map[string]Record{}}
	add := func(name string, ips []string) {
		if len(ips) == 0 {
			return
		}
		r := z.Records[name]
		for _, ip := range ips {
			a, err := netip.ParseAddr(ip)
			if err != nil {
				continue
			}
			if a.Is4() {
				r.A = append(r.A, a.String())
				if twin != nil {
					if t, ok := twin(a); ok {
						r.AAAA = append(r.AAAA, t.String())
					}
				}
			} else {
				r.AAAA = append(r.AAAA, a.String())
			}
		}
		r.A, r.AAAA = sortedUnique(r.A), sortedUnique(r.AAAA)
		if len(r.A)+len(r.AAAA) > 0 {
			z.Records[name] = r
		}
	}
	for _, s := range services {
		base := strings.ToLower(s.Name + "." + s.Namespace + "." + Domain)
		var ready []string
		for _, t := range s.Tasks {
			if t.Ready && t.IP != "" {
				ready = append(ready, t.IP)
				if s.Stateful {
					add(strings.ToLower(s.Name+"-"+strconv.Itoa(t.Ordinal)+"."+base), []string{t.IP})
				}
			}
		}
		if s.VIP != "" && !s.DNSRR {
			add(base, []string{s.VIP})
		} else {
			add(base, ready)
		}
		add("tasks."+base, ready)
	}
	return z
}

func sortedUnique(list []string) []string {
	sort.Strings(list)
	out := list[:0]
	for i, s := range list {
		if i == 0 || s != list[i-1] {
			out = append(out, s)
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// WriteZone writes the zone file atomically (a temporary file renamed into
// place), so the resolver never reads half a zone.
func WriteZone(path string, z Zone) error {
	data, err := json.MarshalIndent(z, "", " ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".zone-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// ReadZone reads a zone file, checking every name and address.
func ReadZone(path string) (Zone, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Zone{}, err
	}
	var z Zone
	if err := json.Unmarshal(data, &z); err != nil {
		return Zone{}, fmt.Errorf("zone file %s: %w", path, err)
	}
	for name, r := range z.Records {
		if !strings.HasSuffix(name, "."+Domain) || name != strings.ToLower(name) {
			return Zone{}, fmt.Errorf("zone file %s: name %q: expected a lower-case name under %s", path, name, Domain)
		}
		for _, ip := range append(append([]string(nil), r.A...), r.AAAA...) {
			if _, err := netip.ParseAddr(ip); err != nil {
				return Zone{}, fmt.Errorf("zone file %s: name %q: %q is not an address", path, name, ip)
			}
		}
	}
	return z, nil
}
