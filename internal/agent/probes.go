package agent

import (
	"context"

	"github.com/legionbsd/legion/internal/agent/probe"
	"github.com/legionbsd/legion/jail"
)

// probeEvent is one probe transition of one container.
type probeEvent struct {
	container string
	result    probe.Result
	gen       int // the container's run the prober watched
}

// execer runs exec probes in a container through the runtime.
type execer struct {
	rt jail.Runtime
	id string
}

func (e execer) Exec(ctx context.Context, cmd []string) (int, error) {
	return e.rt.Exec(ctx, e.id, jail.ExecSpec{Command: cmd})
}

// startProbes runs a main container's probes for its current run; they
// end with the run (or the worker).
func (w *worker) startProbes(ctx context.Context, name string) {
	if cancel, ok := w.probeStop[name]; ok {
		cancel()
		delete(w.probeStop, name)
	}
	c := w.container(name)
	if c == nil {
		return
	}
	p := c.Probes
	if p.Startup == nil && p.Liveness == nil && p.Readiness == nil {
		return
	}
	w.probeGen[name]++
	gen := w.probeGen[name]
	// Only an adopted container is ready here (as its task was): the
	// prober starts from that, so a failure is reported as a change.
	ready := p.Readiness != nil && w.containerReady[name]
	if p.Readiness != nil {
		w.containerReady[name] = ready
	}
	pctx, cancel := context.WithCancel(ctx)
	w.probeStop[name] = cancel
	pr, err := probe.New(probe.Config{
		Probes: expandProbes(p, probeVars(podEnv(w.task, w.status.IP), c)), Pod: &w.task.Spec.Pod, Host: w.status.IP, Started: w.started[name], Ready: ready,
		Exec: execer{rt: w.a.Runtime, id: containerID(w.task, name)},
		Log:  w.a.log,
		Report: func(r probe.Result) {
			select {
			case w.probes <- probeEvent{container: name, result: r, gen: gen}:
			case <-pctx.Done():
			}
		},
	})
	if err != nil {
		cancel()
		w.a.log.Warn("probes not started", "task", w.task.Metadata.Name, "container", name, "err", err)
		return
	}
	w.a.wg.Add(1)
	go func() { defer w.a.wg.Done(); pr.Run(pctx) }()
}

func (w *worker) stopProbes() {
	for name, cancel := range w.probeStop {
		cancel()
		delete(w.probeStop, name)
	}
}

// probeResult acts on one transition: readiness sets the container's
// (and so the task's) ready; a failed liveness or startup probe stops the
// container, and the restart policy decides what follows.
func (w *worker) probeResult(ctx context.Context, ev probeEvent) {
	if _, watched := w.probeStop[ev.container]; !watched || ev.gen != w.probeGen[ev.container] {
		return // from an earlier run of the container, or of one that ended since
	}
	r := ev.result
	switch r.Kind {
	case probe.Readiness:
		w.containerReady[ev.container] = r.Passing
		was := w.ready
		w.ready = w.allReady()
		if was != w.ready {
			msg := ""
			if !w.ready {
				msg = "container " + ev.container + " not ready: " + r.Reason
			}
			w.report(ctx, w.status.State, msg)
		}
	case probe.Liveness, probe.Startup:
		if r.Passing {
			return
		}
		w.a.log.Info("probe failed, stopping the container", "task", w.task.Metadata.Name, "container", ev.container, "probe", r.Kind, "reason", r.Reason)
		w.ready = false
		w.containerReady[ev.container] = false
		w.report(ctx, w.status.State, "container "+ev.container+" "+string(r.Kind)+" probe failed: "+r.Reason)
		w.probeStopped[ev.container] = r.Kind
		if err := w.a.Runtime.Stop(ctx, containerID(w.task, ev.container), -1); err != nil {
			w.a.log.Warn("stopping a container that failed its probe", "err", err)
		}
	}
}

// allReady: every container with a readiness probe passes it.
func (w *worker) allReady() bool {
	for _, c := range w.task.Spec.Pod.Containers {
		if c.Probes.Readiness != nil && !w.containerReady[c.Name] {
			return false
		}
	}
	return true
}
