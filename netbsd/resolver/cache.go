package resolver

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"
)

const (
	// cacheEntries bounds how many upstream answers are kept, and
	// cacheBytes their size on the wire, added up: a pod asking for many
	// large answers cannot make the resolver grow without end.
	cacheEntries = 10000
	cacheBytes   = 4 << 20
	// maxCacheTTL bounds how long one is kept, whatever its TTL says.
	maxCacheTTL = time.Hour
)

// forwardCache keeps the upstream resolvers' answers for names outside
// the zone for as long as their TTL says (negative answers: the SOA's
// minimum, RFC 2308), so a pod asking the same outside name again is
// answered on the node, as every caching forwarder (dnsmasq, unbound)
// does. It also lets questions asked while the same one is on its way
// upstream wait for that answer.
type forwardCache struct {
	max      int
	maxBytes int
	mu       sync.Mutex
	bytes    int // the entries' wire size
	entries  map[cacheKey]*cached
	flights  map[flightKey]*flight
	now      func() time.Time
	// waiting counts the questions waiting for another's (for tests).
	waiting int
}

// cacheKey is what makes two questions the same to the cache: the name
// (lower case), type and class, and whether the client speaks EDNS and
// asks for DNSSEC records, which change the answer.
type cacheKey struct {
	name          string
	qtype, qclass uint16
	edns, do      bool
}

// flightKey tells UDP and TCP questions apart: an answer truncated for
// UDP is no answer over TCP.
type flightKey struct {
	cacheKey
	tcp bool
}

type flight struct {
	done chan struct{}
	resp *dns.Msg
}

// cached is one upstream answer. msg is never changed once stored; the
// records served are copies whose TTLs count down (view), remade at most
// once a second.
type cached struct {
	msg     *dns.Msg
	size    int // on the wire
	stored  time.Time
	expires time.Time
	view    atomic.Pointer[cacheView]
}

type cacheView struct {
	age               uint32
	answer, ns, extra []dns.RR
}

func newForwardCache(max, maxBytes int) *forwardCache {
	return &forwardCache{max: max, maxBytes: maxBytes, entries: map[cacheKey]*cached{}, flights: map[flightKey]*flight{}, now: time.Now}
}

func keyOf(req *dns.Msg, lower string) cacheKey {
	q := req.Question[0]
	k := cacheKey{name: lower, qtype: q.Qtype, qclass: q.Qclass}
	if opt := req.IsEdns0(); opt != nil {
		k.edns, k.do = true, opt.Do()
	}
	return k
}

// respond makes m (set by setReply) the cached answer for k, if there is
// one still fresh.
func (c *forwardCache) respond(m, req *dns.Msg, k cacheKey) bool {
	c.mu.Lock()
	e := c.entries[k]
	c.mu.Unlock()
	if e == nil {
		return false
	}
	now := c.now()
	if !now.Before(e.expires) {
		return false
	}
	age := uint32(now.Sub(e.stored) / time.Second)
	v := e.view.Load()
	if v == nil || v.age != age {
		v = &cacheView{age: age, answer: aged(e.msg.Answer, age), ns: aged(e.msg.Ns, age), extra: aged(e.msg.Extra, age)}
		e.view.Store(v)
	}
	fromUpstream(m, e.msg, v.answer, v.ns, v.extra)
	return true
}

// aged copies records with their TTLs less age seconds.
func aged(rrs []dns.RR, age uint32) []dns.RR {
	if len(rrs) == 0 {
		return nil
	}
	out := make([]dns.RR, len(rrs))
	for i, rr := range rrs {
		if rr.Header().Rrtype == dns.TypeOPT || age == 0 {
			out[i] = rr // OPT's TTL is flags, not time; fromUpstream copies it
			continue
		}
		cp := dns.Copy(rr)
		cp.Header().Ttl -= min(age, cp.Header().Ttl)
		out[i] = cp
	}
	return out
}

// fromUpstream makes m (set by setReply) an upstream answer: its header
// (not authoritative: the answer is relayed), rcode and records, shared
// with the cache and so never changed. OPT is the one record packing
// writes to (the extended rcode): m gets a copy of it, without options
// (cookies and the like were for the client that asked first).
func fromUpstream(m, resp *dns.Msg, answer, ns, extra []dns.RR) {
	id, rd, cd := m.Id, m.RecursionDesired, m.CheckingDisabled
	m.MsgHdr = resp.MsgHdr
	m.Id, m.RecursionDesired, m.CheckingDisabled = id, rd, cd
	m.Authoritative = false
	m.Answer = append(m.Answer, answer...)
	m.Ns = append(m.Ns, ns...)
	for _, rr := range extra {
		if opt, ok := rr.(*dns.OPT); ok {
			o := *opt
			o.Option = nil
			rr = &o
		}
		m.Extra = append(m.Extra, rr)
	}
}

// flight returns the upstream answer for k: the one another question
// already waits for, else ask's, which it keeps when it can be kept.
func (c *forwardCache) flight(k cacheKey, tcp bool, ask func() *dns.Msg) *dns.Msg {
	fk := flightKey{k, tcp}
	c.mu.Lock()
	if f := c.flights[fk]; f != nil {
		c.waiting++
		c.mu.Unlock()
		<-f.done
		c.mu.Lock()
		c.waiting--
		c.mu.Unlock()
		return f.resp
	}
	f := &flight{done: make(chan struct{})}
	c.flights[fk] = f
	c.mu.Unlock()

	f.resp = ask()
	ttl, ok := cacheTTL(f.resp)
	size := 0
	if ok {
		// One answer is at most a sixteenth of the budget, and no larger
		// than the UDP answers EDNS clients take.
		size = f.resp.Len()
		ok = size <= min(c.maxBytes/16, dns.DefaultMsgSize)
	}
	c.mu.Lock()
	delete(c.flights, fk)
	if ok {
		now := c.now()
		c.drop(k)
		c.makeRoom(now, size)
		c.entries[k] = &cached{msg: f.resp, size: size, stored: now, expires: now.Add(ttl)}
		c.bytes += size
	}
	c.mu.Unlock()
	close(f.done)
	return f.resp
}

// makeRoom makes room for one more entry of size bytes: when the cache
// is full it drops the expired entries, and if that is not enough others
// until a tenth is free. Called with mu held.
func (c *forwardCache) makeRoom(now time.Time, size int) {
	if len(c.entries) < c.max && c.bytes+size <= c.maxBytes {
		return
	}
	for k, e := range c.entries {
		if !now.Before(e.expires) {
			c.drop(k)
		}
	}
	for k := range c.entries {
		if len(c.entries) < c.max-c.max/10 && c.bytes+size <= c.maxBytes-c.maxBytes/10 {
			break
		}
		c.drop(k) // map order: an arbitrary one
	}
}

// drop forgets k's entry. Called with mu held.
func (c *forwardCache) drop(k cacheKey) {
	if e := c.entries[k]; e != nil {
		c.bytes -= e.size
		delete(c.entries, k)
	}
}

// cacheTTL is how long an upstream answer may be kept: the smallest TTL
// of its records, for a negative answer (NXDOMAIN, or no records of the
// type) the SOA's, capped by maxCacheTTL. Failures, truncated answers and
// negative answers without a SOA are not kept.
func cacheTTL(m *dns.Msg) (time.Duration, bool) {
	if m == nil || m.Truncated || (m.Rcode != dns.RcodeSuccess && m.Rcode != dns.RcodeNameError) {
		return 0, false
	}
	ttl := uint32(maxCacheTTL / time.Second)
	if m.Rcode == dns.RcodeNameError || len(m.Answer) == 0 {
		found := false
		for _, rr := range m.Ns {
			if s, ok := rr.(*dns.SOA); ok {
				ttl, found = min(ttl, s.Hdr.Ttl, s.Minttl), true
			}
		}
		if !found {
			return 0, false
		}
	}
	for _, sec := range [][]dns.RR{m.Answer, m.Ns, m.Extra} {
		for _, rr := range sec {
			if rr.Header().Rrtype != dns.TypeOPT {
				ttl = min(ttl, rr.Header().Ttl)
			}
		}
	}
	if ttl == 0 {
		return 0, false
	}
	return time.Duration(ttl) * time.Second, true
}
