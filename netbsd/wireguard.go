package netbsd

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/legionbsd/legion/netbsd/addrplan"

	"github.com/legionbsd/legion/sys"
)

// EnsureKey returns the node's WireGuard public key, making the private key
// with `wg genkey` on first start. The key file is mode 0600 and written
// aside then renamed, so a crash never leaves half a key.
func EnsureKey(ctx context.Context, r sys.Runner, path string) (string, error) {
	priv, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		res, err := r.Run(ctx, sys.Command("wg", "genkey"))
		if err != nil {
			return "", fmt.Errorf("make WireGuard key: %w", err)
		}
		priv = []byte(strings.TrimSpace(string(res.Stdout)) + "\n")
		if len(priv) < 2 {
			return "", errors.New("make WireGuard key: wg genkey printed nothing")
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return "", fmt.Errorf("WireGuard key %s: %w", path, err)
		}
		tmp := path + ".new"
		if err := os.WriteFile(tmp, priv, 0o600); err != nil {
			return "", fmt.Errorf("WireGuard key %s: %w", path, err)
		}
		if err := os.Chmod(tmp, 0o600); err != nil { // against a umask or an old file
			return "", fmt.Errorf("WireGuard key %s: %w", path, err)
		}
		if err := os.Rename(tmp, path); err != nil {
			return "", fmt.Errorf("WireGuard key %s: %w", path, err)
		}
	case err != nil:
		return "", fmt.Errorf("WireGuard key %s: %w", path, err)
	default:
		st, err := os.Stat(path)
		if err != nil {
			return "", fmt.Errorf("WireGuard key %s: %w", path, err)
		}
		if st.Mode().Perm() != 0o600 {
			if err := os.Chmod(path, 0o600); err != nil {
				return "", fmt.Errorf("WireGuard key %s: mode %v, expected 0600: %w", path, st.Mode().Perm(), err)
			}
		}
	}
	res, err := r.Run(ctx, sys.Cmd{Name: "wg", Args: []string{"pubkey"}, Stdin: priv})
	if err != nil {
		return "", fmt.Errorf("derive WireGuard public key: %w", err)
	}
	pub := strings.TrimSpace(string(res.Stdout))
	if pub == "" {
		return "", errors.New("derive WireGuard public key: wg pubkey printed nothing")
	}
	return pub, nil
}

// WGPeer is a peer as `wg show wg0 dump` lists it.
type WGPeer struct {
	PublicKey  string
	Endpoint   netip.AddrPort // zero when none
	AllowedIPs []netip.Prefix
	Keepalive  int // 0: off
}

// parseWGDump reads `wg show <if> dump`: the interface's line, then one
// tab-separated line per peer.
func parseWGDump(out string) ([]WGPeer, error) {
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	var peers []WGPeer
	for i, line := range lines {
		if i == 0 || line == "" {
			continue
		}
		f := strings.Split(line, "\t")
		if len(f) != 8 {
			return nil, fmt.Errorf("wg dump line %d: %d fields, expected 8", i+1, len(f))
		}
		p := WGPeer{PublicKey: f[0]}
		if f[2] != "(none)" {
			ep, err := netip.ParseAddrPort(f[2])
			if err != nil {
				return nil, fmt.Errorf("wg dump line %d: endpoint: %w", i+1, err)
			}
			p.Endpoint = ep
		}
		if f[3] != "(none)" {
			for _, s := range strings.Split(f[3], ",") {
				pre, err := netip.ParsePrefix(s)
				if err != nil {
					return nil, fmt.Errorf("wg dump line %d: allowed ips: %w", i+1, err)
				}
				p.AllowedIPs = append(p.AllowedIPs, pre)
			}
		}
		if f[7] != "off" {
			k, err := strconv.Atoi(f[7])
			if err == nil && (k < 0 || k > 65535) {
				err = fmt.Errorf("out of range")
			}
			if err != nil {
				return nil, fmt.Errorf("wg dump line %d: keepalive %q: %w", i+1, f[7], err)
			}
			p.Keepalive = k
		}
		peers = append(peers, p)
	}
	return peers, nil
}

// PeerAllowedIPs is what a peer node routes for: its pod /24 and /64 in
// plan p and its underlay /32 and /128.
func PeerAllowedIPs(p addrplan.Plan, n Node) []netip.Prefix {
	u := n.Underlay()
	return []netip.Prefix{
		p.NodeSubnet(n.Subnet), p.NodeSubnet6(n.Subnet),
		netip.PrefixFrom(u, 32), netip.PrefixFrom(p.MustTwin(u), 128),
	}
}

func joinPrefixes(ps []netip.Prefix) string {
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = p.String()
	}
	return strings.Join(s, ",")
}

func samePrefixSet(a, b []netip.Prefix) bool {
	if len(a) != len(b) {
		return false
	}
	m := make(map[netip.Prefix]int, len(a))
	for _, p := range a {
		m[p.Masked()]++
	}
	for _, p := range b {
		m[p.Masked()]--
	}
	for _, v := range m {
		if v != 0 {
			return false
		}
	}
	return true
}

// PlanPeers returns the `wg set` commands that converge wg0's peers to
// nodes (every node but self), touching only what differs. advertised is
// the endpoint each peer advertised when last seen (by public key); an
// endpoint is set only for a new peer or a changed advertisement, so an
// endpoint WireGuard learned from a peer behind NAT stands. The returned
// map is the new advertised set. Pod ranges come from plan.
func PlanPeers(plan addrplan.Plan, self string, current []WGPeer, nodes []Node, advertised map[string]netip.AddrPort) ([][]string, map[string]netip.AddrPort) {
	have := make(map[string]WGPeer, len(current))
	for _, p := range current {
		have[p.PublicKey] = p
	}
	want := make(map[string]Node, len(nodes))
	keys := make([]string, 0, len(nodes))
	for _, n := range nodes {
		if n.Name == self || n.PublicKey == "" {
			continue
		}
		if _, dup := want[n.PublicKey]; !dup {
			keys = append(keys, n.PublicKey)
		}
		want[n.PublicKey] = n
	}
	sort.Slice(keys, func(i, j int) bool { return want[keys[i]].Subnet < want[keys[j]].Subnet })
	next := make(map[string]netip.AddrPort, len(keys))
	var cmds [][]string
	for _, k := range keys {
		n := want[k]
		allowed := PeerAllowedIPs(plan, n)
		next[k] = n.Endpoint
		cur, exists := have[k]
		args := []string{"set", WGIface, "peer", k}
		if !exists || cur.Keepalive != Keepalive {
			args = append(args, "persistent-keepalive", strconv.Itoa(Keepalive))
		}
		if !exists || !samePrefixSet(cur.AllowedIPs, allowed) {
			args = append(args, "allowed-ips", joinPrefixes(allowed))
		}
		if n.Endpoint.IsValid() {
			prev, known := advertised[k]
			if !exists || (known && prev != n.Endpoint) || !cur.Endpoint.IsValid() {
				args = append(args, "endpoint", n.Endpoint.String())
			}
		}
		if len(args) > 4 {
			cmds = append(cmds, args)
		}
	}
	gone := make([]string, 0)
	for _, p := range current {
		if _, ok := want[p.PublicKey]; !ok {
			gone = append(gone, p.PublicKey)
		}
	}
	sort.Strings(gone)
	for _, k := range gone {
		cmds = append(cmds, []string{"set", WGIface, "peer", k, "remove"})
	}
	return cmds, next
}

// Mesh converges wg0's peers. It remembers the endpoints peers advertised,
// so that only a changed advertisement moves an endpoint.
type Mesh struct {
	R    sys.Runner
	Self string
	Plan addrplan.Plan // the cluster's ranges; zero: addrplan.Default()

	mu         sync.Mutex
	advertised map[string]netip.AddrPort
}

// Converge applies the peer list. A nil list means none has arrived yet
// (an agent just restarted): nothing is touched, so traffic goes on over
// the peers already there. An empty list removes every peer.
func (m *Mesh) Converge(ctx context.Context, nodes []Node) ([]string, error) {
	if nodes == nil {
		return nil, nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	res, err := m.R.Run(ctx, sys.Command("wg", "show", WGIface, "dump"))
	if err != nil {
		return nil, fmt.Errorf("read %s peers: %w", WGIface, err)
	}
	cur, err := parseWGDump(string(res.Stdout))
	if err != nil {
		return nil, err
	}
	cmds, next := PlanPeers(m.Plan, m.Self, cur, nodes, m.advertised)
	var done []string
	for _, c := range cmds {
		cmd := sys.Command("wg", c...)
		if _, err := m.R.Run(ctx, cmd); err != nil {
			return done, fmt.Errorf("converge %s peers: %w", WGIface, err)
		}
		done = append(done, cmd.String())
	}
	m.advertised = next
	return done, nil
}
