package scale

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/client"
	"github.com/legionbsd/legion/cluster/store"
)

// Namespace holds the services the scenarios apply.
const Namespace = "scale"

// poll is how often the scenarios look whether the cluster got there by
// default (Harness.Poll): a look is a pass over the tally.
const poll = 100 * time.Millisecond

// service is one of the scenarios' services at an image tag.
func service(i, replicas int, tag string) *legion.Service {
	s := &legion.Service{Header: legion.Header{APIVersion: legion.APIVersion, Kind: legion.KindService,
		Metadata: legion.Metadata{Namespace: Namespace, Name: fmt.Sprintf("svc-%03d", i)}}}
	s.Spec.Replicas = &replicas
	s.Spec.Pod.Containers = []legion.Container{{Name: "app", Image: imageOf(tag)}}
	par, monitor := 25, legion.Duration(0)
	s.Spec.Update = legion.UpdateConfig{Parallelism: &par, Monitor: &monitor}
	return s
}

// imageOf is the image of a tag, pinned by a digest made of it (a hex
// digit) so the managers resolve nothing.
func imageOf(tag string) string {
	return "example.org/scale/app@sha256:" + strings.Repeat(tag, 64)[:64]
}

// Apply applies n services of replicas tasks each, at tag.
func (h *Harness) Apply(ctx context.Context, n, replicas int, tag string) error {
	c := h.Client()
	ns := &legion.Namespace{Header: legion.Header{APIVersion: legion.APIVersion, Kind: legion.KindNamespace,
		Metadata: legion.Metadata{Name: Namespace}}}
	if err := retry(ctx, func() error { _, err := c.ApplyOne(ctx, ns, client.ApplyOptions{}); return err }); err != nil {
		return fmt.Errorf("namespace: %w", err)
	}
	objs := make([]legion.Object, n)
	for i := range n {
		objs[i] = service(i, replicas, tag)
	}
	// A few dozen at a time: one apply is one request.
	for len(objs) > 0 {
		k := min(len(objs), 50)
		if err := retry(ctx, func() error { _, err := c.Apply(ctx, objs[:k], client.ApplyOptions{}); return err }); err != nil {
			return fmt.Errorf("apply: %w", err)
		}
		objs = objs[k:]
	}
	return nil
}

// retry calls f until it succeeds or ctx ends: an apply is the same
// however often it is made, and a loaded machine may hold an election
// in the middle of one.
func retry(ctx context.Context, f func() error) error {
	for {
		err := f()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last: %w)", ctx.Err(), err)
		case <-time.After(retryWait):
		}
	}
}

// retryWait is the wait between two tries of a failed call.
const retryWait = 500 * time.Millisecond

// Counts is the scenarios' tasks as the leader's replica holds them.
type Counts struct {
	Running   int // told to run, running and ready
	AtTag     int // of those, at the tag asked
	OnNodes   int // of those, on the nodes asked
	Other     int // every other task of the namespace
	ReadAtVer uint64
}

// imageAt is the image counted at tag: any ("") for no tag. Worked out
// once per count, not per task: a count at 20,000 tasks every poll shares
// the cores with the cluster it measures.
func imageAt(tag string) string {
	if tag == "" {
		return ""
	}
	return imageOf(tag)
}

// add counts one task in, as asked for image (imageAt) and nodes.
func (c *Counts) add(s taskState, image string, nodes map[string]bool) {
	if !s.running {
		c.Other++
		return
	}
	c.Running++
	if image == "" || s.image == image {
		c.AtTag++
	}
	if nodes == nil || nodes[s.node] {
		c.OnNodes++
	}
}

// Count reads the scenarios' tasks from the leader's replica.
func (h *Harness) Count(tag string, nodes map[string]bool) (Counts, error) {
	st := h.Cluster.WaitLeader().Store()
	if st == nil {
		return Counts{}, fmt.Errorf("no leader store")
	}
	objs, at, err := st.List(legion.KindTask, Namespace, nil)
	if err != nil {
		return Counts{}, err
	}
	c, image := Counts{ReadAtVer: at}, imageAt(tag)
	for _, o := range objs {
		c.add(stateOf(o.(*legion.Task)), image, nodes)
	}
	return c, nil
}

// WaitFor looks at the tally every Poll until done holds or ctx ends, and
// returns when it first held. What the tally says is confirmed with a
// Count (a read of every task from the leader's replica) before it
// answers; the time that read takes is the measurement's, not the
// cluster's, so the answer is when the tally saw it.
func (h *Harness) WaitFor(ctx context.Context, what, tag string, nodes map[string]bool, done func(Counts) bool) (time.Time, error) {
	start := time.Now()
	y := h.followTally()
	every := h.Poll
	if every == 0 {
		every = poll
	}
	t := time.NewTicker(every)
	defer t.Stop()
	var last Counts
	leader := func() *store.Store { return h.Cluster.WaitLeader().Store() }
	for {
		y.offer(leader)
		if c, ok := y.counts(tag, nodes); ok {
			last = c
			if h.Trace != nil {
				h.Trace("%s %s: running %d, at the tag %d, on the nodes %d, other %d", time.Since(start).Round(time.Millisecond), what,
					c.Running, c.AtTag, c.OnNodes, c.Other)
			}
			if done(c) {
				seen := time.Now()
				full, err := h.Count(tag, nodes)
				if err == nil && done(full) {
					return seen, nil
				}
				if err == nil {
					h.t.Logf("%s: the tally says done, a read of every task does not: running %d, at the tag %d, on the nodes %d, other %d",
						what, full.Running, full.AtTag, full.OnNodes, full.Other)
					last = full
				}
			}
		}
		select {
		case <-ctx.Done():
			return time.Time{}, fmt.Errorf("%s: not within %s: running %d, at tag %d, on the nodes %d, other %d",
				what, time.Since(start).Round(time.Millisecond), last.Running, last.AtTag, last.OnNodes, last.Other)
		case <-t.C:
		}
	}
}

// followTally starts the tally on first use; it stops at the test's end.
func (h *Harness) followTally() *tally {
	h.tallyOnce.Do(func() {
		h.tally = &tally{h: h, offers: make(chan *store.Store, 1)}
		ctx, cancel := context.WithCancel(context.Background())
		stopped := make(chan struct{})
		h.t.Cleanup(func() {
			cancel()
			<-stopped
		})
		go func() {
			defer close(stopped)
			h.tally.follow(ctx)
		}()
	})
	return h.tally
}

// Drain drains the nodes.
func (h *Harness) Drain(ctx context.Context, nodes []string) error {
	c := h.Client()
	for _, name := range nodes {
		// The read too goes through elections: on a loaded machine two
		// managers left of three lose their leader now and then.
		if err := retry(ctx, func() error {
			o, err := c.Get(ctx, legion.KindNode, "", name)
			if err != nil {
				return err
			}
			n := o.(*legion.Node)
			n.Spec.Availability = legion.AvailabilityDrain
			_, err = c.ApplyOne(ctx, n, client.ApplyOptions{})
			return err
		}); err != nil {
			return fmt.Errorf("draining %s: %w", name, err)
		}
	}
	return nil
}
