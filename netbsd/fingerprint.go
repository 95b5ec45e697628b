package netbsd

import (
	"crypto/sha256"
	"encoding/binary"
	"hash"
	"net/netip"
	"sort"
)

// policyRulesKey fingerprints everything the policy rules depend on (not
// the endpoints), so that an endpoint change can reuse the rendered rules
// without the applier keeping a deep copy of the caller's state.
func policyRulesKey(st *PolicyState) [sha256.Size]byte {
	h := fp{sha256.New()}
	h.str(st.Node.Name)
	h.int(st.Node.Subnet)
	h.str(st.Plan.Pod.String())
	h.str(st.Plan.Service.String())
	h.labels(func() map[string]string {
		m := make(map[string]string, len(st.Isolation))
		for k, v := range st.Isolation {
			m[k] = string(v)
		}
		return m
	}())
	h.int(len(st.Policies))
	for _, p := range st.Policies {
		h.str(p.Namespace)
		h.str(p.Name)
		h.labels(p.Services)
		h.rules(p.Ingress)
		if p.Egress == nil {
			h.int(-1)
		} else {
			h.rules(*p.Egress)
		}
	}
	h.int(len(st.Services))
	for _, s := range st.Services {
		h.str(s.Namespace)
		h.str(s.Name)
		h.addr(s.VIP)
		h.labels(s.Labels)
		h.int(len(s.Ports))
		for _, p := range s.Ports {
			h.str(p.Name)
			h.str(string(p.Proto))
			h.int(int(p.Port))
			h.int(int(p.TargetPort))
			h.str(string(p.Publish))
			h.int(int(p.PublishedPort))
		}
	}
	h.int(len(st.Pods))
	for _, p := range st.Pods {
		h.str(p.TaskUID)
		h.str(p.Namespace)
		h.str(p.Service)
		h.labels(p.ServiceLabels)
		h.str(p.HostIf)
		h.addr(p.Addr)
	}
	var out [sha256.Size]byte
	h.h.Sum(out[:0])
	return out
}

type fp struct{ h hash.Hash }

func (f fp) int(n int) {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], uint64(n))
	f.h.Write(b[:])
}

// str writes a length-prefixed string, so that no two sequences of
// strings write the same bytes.
func (f fp) str(s string) {
	f.int(len(s))
	f.h.Write([]byte(s))
}

func (f fp) addr(a netip.Addr) {
	b, _ := a.MarshalBinary()
	f.str(string(b))
}

func (f fp) labels(m map[string]string) {
	if m == nil {
		f.int(-1)
		return
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	f.int(len(keys))
	for _, k := range keys {
		f.str(k)
		f.str(m[k])
	}
}

func (f fp) rules(rs []PolicyRule) {
	if rs == nil {
		f.int(-1)
		return
	}
	f.int(len(rs))
	for _, r := range rs {
		f.int(len(r.Peers))
		for _, p := range r.Peers {
			f.str(p.Namespace)
			f.labels(p.ServiceLabels)
			b, _ := p.CIDR.MarshalBinary()
			f.str(string(b))
		}
		f.int(len(r.Ports))
		for _, p := range r.Ports {
			f.str(string(p.Proto))
			f.int(int(p.Port))
		}
	}
}
