package sessionsclient

import (
	"sync"

	legionpb "github.com/legionbsd/legion/internal/proto"
)

// counts keeps how many sessions of each kind are open and were served,
// for the agent's metrics.
type counts struct {
	mu     sync.Mutex
	open   map[string]int
	served map[string]uint64
}

// start counts a session of kind as open; the function it returns counts
// it ended.
func (c *counts) start(kind string) func() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.open == nil {
		c.open, c.served = map[string]int{}, map[string]uint64{}
	}
	c.open[kind]++
	c.served[kind]++
	return func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.open[kind]--
	}
}

// Sessions says how many sessions of each kind (logs, exec, port-forward,
// volume-send, volume-receive, volume-drop) are open now, and how many
// were offered since the start.
func (c *Client) Sessions() (open map[string]int, served map[string]uint64) {
	c.counts.mu.Lock()
	defer c.counts.mu.Unlock()
	open, served = map[string]int{}, map[string]uint64{}
	for k, v := range c.counts.open {
		open[k] = v
	}
	for k, v := range c.counts.served {
		served[k] = v
	}
	return open, served
}

// kindOf names an offer's kind.
func kindOf(o *legionpb.SessionOffer) string {
	switch o.Kind.(type) {
	case *legionpb.SessionOffer_Logs:
		return "logs"
	case *legionpb.SessionOffer_Exec:
		return "exec"
	case *legionpb.SessionOffer_PortForward:
		return "port-forward"
	case *legionpb.SessionOffer_VolumeSend:
		return "volume-send"
	case *legionpb.SessionOffer_VolumeReceive:
		return "volume-receive"
	case *legionpb.SessionOffer_VolumeDrop:
		return "volume-drop"
	}
	return "unknown"
}
