package daemon

import (
	"context"
	"fmt"
	"net/netip"
	"sync"

	"github.com/legionbsd/legion"
)

// LoopbackNetwork gives pods addresses in a /24 of 127.0.0.0/8 (the
// node's pod subnet mapped there) on hosts without VNET jails. It
// isolates nothing: pods share the host's stack and bind their own
// address (LEGION_POD_IP) to keep out of each other's ports.
type LoopbackNetwork struct {
	// Subnet is the node's pod /24 in 127/8, e.g. 127.200.1.0/24.
	Subnet netip.Prefix

	mu    sync.Mutex
	inUse map[netip.Addr]string // address -> task uid
}

// Attach gives a task the lowest free address, or the one it has.
func (n *LoopbackNetwork) Attach(_ context.Context, t *legion.Task) (string, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.inUse == nil {
		n.inUse = map[netip.Addr]string{}
	}
	if t.Status.IP != "" {
		if a, err := netip.ParseAddr(t.Status.IP); err == nil && n.Subnet.Contains(a) {
			n.inUse[a] = t.Metadata.UID
			return a.String(), nil
		}
	}
	for a, uid := range n.inUse {
		if uid == t.Metadata.UID {
			return a.String(), nil
		}
	}
	// .0 is the network, .1 the gateway (the resolver), .255 broadcast.
	a := n.Subnet.Masked().Addr().Next().Next()
	for ; n.Subnet.Contains(a) && a.As4()[3] != 255; a = a.Next() {
		if _, taken := n.inUse[a]; !taken {
			n.inUse[a] = t.Metadata.UID
			return a.String(), nil
		}
	}
	return "", fmt.Errorf("pod subnet %s is full", n.Subnet)
}

// Detach frees the task's address.
func (n *LoopbackNetwork) Detach(_ context.Context, t *legion.Task) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	for a, uid := range n.inUse {
		if uid == t.Metadata.UID {
			delete(n.inUse, a)
		}
	}
	return nil
}

// reserve holds a for the task uid (an address found in use).
func (n *LoopbackNetwork) reserve(a netip.Addr, uid string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.inUse == nil {
		n.inUse = map[netip.Addr]string{}
	}
	n.inUse[a] = uid
}

// holder is the address held for the task uid, if any.
func (n *LoopbackNetwork) holder(uid string) (netip.Addr, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for a, u := range n.inUse {
		if u == uid {
			return a, true
		}
	}
	return netip.Addr{}, false
}
