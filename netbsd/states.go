package netbsd

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// pfHost is one side of a state as pfctl prints it: a.b.c.d:port or
// v6addr[port], or the bare address when the port is 0.
type pfHost struct {
	Text string
	Addr netip.Addr
}

func parsePFHost(s string) (pfHost, error) {
	h := pfHost{Text: s}
	addr, port, v6 := s, "", false
	if a, err := netip.ParseAddr(s); err == nil {
		// pfctl prints no port when it is 0 (protocols without ports).
		h.Addr = a
		return h, nil
	}
	if i := strings.IndexByte(s, '['); i >= 0 {
		p, ok := strings.CutSuffix(s[i+1:], "]")
		if !ok {
			return h, fmt.Errorf("state host %q: expected addr[port]", s)
		}
		addr, port, v6 = s[:i], p, true
	} else if i := strings.LastIndexByte(s, ':'); i >= 0 {
		addr, port = s[:i], s[i+1:]
	}
	a, err := netip.ParseAddr(addr)
	if err != nil {
		return h, fmt.Errorf("state host %q: %w", s, err)
	}
	if a.Is6() != v6 {
		return h, fmt.Errorf("state host %q: expected a.b.c.d:port or v6addr[port]", s)
	}
	// The text goes back to pfctl as a key: its port must be one.
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return h, fmt.Errorf("state host %q: port %q: expected 0..65535", s, port)
	}
	h.Addr = a
	return h, nil
}

// pfState is one line of `pfctl -s states`:
//
//	IF PROTO A [(A')] <-|-> B [(B')] STATE
//
// For an inbound state (<-) pfctl prints the addresses after translation
// and, in parentheses, those on the wire; for an outbound one (->) the
// wire's first and the stack's in parentheses.
type pfState struct {
	Proto            string
	Dir              string
	A, AParen        pfHost
	B, BParen        pfHost
	hasAParen, hasBP bool
}

func parseStates(out string) ([]pfState, error) {
	var states []pfState
	for i, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if len(f) < 5 {
			return nil, fmt.Errorf("pfctl states line %d: %q: too few fields", i+1, line)
		}
		st := pfState{Proto: f[1]}
		rest := f[2:]
		var err error
		if st.A, err = parsePFHost(rest[0]); err != nil {
			return nil, fmt.Errorf("pfctl states line %d: %w", i+1, err)
		}
		rest = rest[1:]
		if len(rest) > 0 && strings.HasPrefix(rest[0], "(") {
			if st.AParen, err = parsePFHost(strings.Trim(rest[0], "()")); err != nil {
				return nil, fmt.Errorf("pfctl states line %d: %w", i+1, err)
			}
			st.hasAParen, rest = true, rest[1:]
		}
		if len(rest) < 2 || (rest[0] != "<-" && rest[0] != "->") {
			return nil, fmt.Errorf("pfctl states line %d: %q: expected a direction <- or ->", i+1, line)
		}
		st.Dir = rest[0]
		if st.B, err = parsePFHost(rest[1]); err != nil {
			return nil, fmt.Errorf("pfctl states line %d: %w", i+1, err)
		}
		rest = rest[2:]
		if len(rest) > 0 && strings.HasPrefix(rest[0], "(") {
			if st.BParen, err = parsePFHost(strings.Trim(rest[0], "()")); err != nil {
				return nil, fmt.Errorf("pfctl states line %d: %w", i+1, err)
			}
			st.hasBP = true
		}
		states = append(states, st)
	}
	return states, nil
}

// translatedTo returns the address a translated state sends to, after
// translation (the backend of a VIP's or published port's rdr, or the
// destination of a NATed connection); false for an untranslated state.
func (s pfState) translatedTo() (netip.Addr, bool) {
	if !s.hasAParen && !s.hasBP {
		return netip.Addr{}, false
	}
	if s.Dir == "<-" {
		return s.A.Addr, true
	}
	return s.B.Addr, true
}

// key is the state's wire key in the form `pfctl -k key -k` takes:
// "proto host direction host". Killing by address does not work for an
// rdr state: it is keyed by the VIP, not by the backend.
func (s pfState) key() string {
	a, b := s.A.Text, s.B.Text
	if s.Dir == "<-" {
		if s.hasAParen {
			a = s.AParen.Text
		}
		if s.hasBP {
			b = s.BParen.Text
		}
	}
	return s.Proto + " " + a + " " + s.Dir + " " + b
}

// PlanStateKills returns, for the states pfctl listed, the `pfctl -k key`
// arguments killing those translated to a dead backend (either family), so
// that the client's next packet fails fast instead of timing out.
func PlanStateKills(statesOut string, dead map[netip.Addr]bool) ([][]string, error) {
	if len(dead) == 0 {
		return nil, nil
	}
	states, err := parseStates(statesOut)
	if err != nil {
		return nil, err
	}
	var cmds [][]string
	seen := make(map[string]bool)
	for _, s := range states {
		to, ok := s.translatedTo()
		if !ok || !dead[to] {
			continue
		}
		k := s.key()
		if seen[k] {
			continue
		}
		seen[k] = true
		cmds = append(cmds, []string{"-k", "key", "-k", k})
	}
	return cmds, nil
}
