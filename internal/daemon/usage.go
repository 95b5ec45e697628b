package daemon

import (
	"context"
	"sort"
	"sync"
	"time"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/internal/agent"
	"github.com/legionbsd/legion/jail"
)

// usageSampler measures what each running task's containers use together,
// for the autoscaler: CPU as a rate between two samples, memory as now.
// A task is reported once every one of its containers has two samples.
type usageSampler struct {
	rt   jail.Runtime
	node string
	now  func() time.Time

	mu   sync.Mutex
	last map[string]cpuSample // by container id
}

type cpuSample struct {
	cpu time.Duration
	at  time.Time
}

func newUsageSampler(rt jail.Runtime, node string) *usageSampler {
	return &usageSampler{rt: rt, node: node, now: time.Now, last: map[string]cpuSample{}}
}

// Usage samples every running container of the node.
func (u *usageSampler) Usage() []legion.Usage {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	cs, err := u.rt.List(ctx, map[string]string{agent.LabelNode: u.node})
	if err != nil {
		return nil
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	type key struct{ ns, task string }
	sums := map[key]*legion.Usage{}
	incomplete := map[key]bool{}
	seen := map[string]bool{}
	now := u.now()
	for _, c := range cs {
		if c.Infra || c.State != jail.StateRunning {
			continue
		}
		k := key{c.Labels[agent.LabelNamespace], c.Labels[agent.LabelTaskName]}
		if k.task == "" {
			continue
		}
		use, err := u.rt.Usage(ctx, c.ID)
		if err != nil {
			incomplete[k] = true
			continue
		}
		seen[c.ID] = true
		prev, had := u.last[c.ID]
		u.last[c.ID] = cpuSample{cpu: use.CPUTime, at: now}
		s := sums[k]
		if s == nil {
			s = &legion.Usage{Namespace: k.ns, Task: k.task, Node: u.node, Time: now}
			sums[k] = s
		}
		s.Memory += legion.Bytes(use.MemoryBytes)
		if !had || !now.After(prev.at) || use.CPUTime < prev.cpu {
			incomplete[k] = true
			continue
		}
		s.CPU += legion.CPU((use.CPUTime - prev.cpu) * 1000 / now.Sub(prev.at))
	}
	for id := range u.last {
		if !seen[id] {
			delete(u.last, id)
		}
	}
	out := make([]legion.Usage, 0, len(sums))
	for k, s := range sums {
		if !incomplete[k] {
			out = append(out, *s)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Task < out[j].Task })
	return out
}
