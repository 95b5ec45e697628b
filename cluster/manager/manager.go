// Package manager runs the cluster side of a Legion daemon as a library:
// its gRPC port (cluster/server: the API, the dispatcher, sessions, Raft)
// and, once the daemon is a manager of its cluster, the leader's work
// (cluster/leader) for as long as it leads, and the audit flusher, which
// writes (leader) or hands on (follower) the events recorded here. It
// needs no agent: a manager that runs no tasks still plans, allocates and
// resolves for the others.
//
// A program embeds a manager with Start and ends it with Stop. cmd/legion's
// daemon and up commands do so and add the node's agent (internal/daemon)
// beside it, which reaches this manager through its dispatcher like any
// other node.
//
// It must not import the node side (internal/agent, internal/daemon, jail
// and its runtimes): a manager runs where no pods do.
package manager

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/legionbsd/legion/cluster/audit"
	"github.com/legionbsd/legion/cluster/controller"
	"github.com/legionbsd/legion/cluster/leader"
	"github.com/legionbsd/legion/cluster/metrics"
	"github.com/legionbsd/legion/cluster/server"
	"github.com/legionbsd/legion/image"
)

// Config configures a manager.
type Config struct {
	// Server is the port's configuration: data directory, listen and
	// advertise addresses, Raft timing, logger.
	Server server.Config
	// Registry resolves image tags and reads their signatures on the
	// leader; nil means a registry client of its own (the host's proxy
	// settings apply).
	Registry *image.Registry
	// LeaderCheck is how often the manager looks whether it leads
	// (leader.CheckPeriod when zero).
	LeaderCheck time.Duration
	// Audit is how long, and how many, audit events the leader keeps
	// (audit.DefaultRetention and audit.DefaultMaxEvents when zero).
	Audit audit.Retention
}

// Manager is a running daemon port with the leader's work beside it.
type Manager struct {
	srv      *server.Server
	cancel   context.CancelFunc
	leading  chan struct{} // closed when the leader's work has returned
	audited  chan struct{} // closed when the audit flusher has returned
	served   chan struct{} // closed when Serve has returned
	serveErr error
	stopOnce sync.Once
}

// Start opens the port on its data directory (rejoining the cluster from
// disk if the daemon belongs to one), serves it, and runs the leader's
// work whenever this daemon is a manager that leads, including after an
// init or a join that comes later.
func Start(cfg Config) (*Manager, error) {
	var passed func(controller.PassResult)
	var planning *metrics.Controller
	if reg := cfg.Server.Metrics; reg != nil {
		var err error
		if planning, err = metrics.NewController(reg); err != nil {
			return nil, fmt.Errorf("registering the planning passes' metrics: %w", err)
		}
		passed = func(r controller.PassResult) {
			planning.Passed(metrics.Pass{Read: r.Read, Plan: r.Plan, Write: r.Write,
				Applied: r.Writes, Conflicts: r.Conflicts, Failed: r.Errors, Unchanged: r.Unchanged})
		}
	}
	srv, err := server.New(cfg.Server)
	if err != nil {
		if planning != nil {
			planning.Unregister(cfg.Server.Metrics)
		}
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	m := &Manager{srv: srv, cancel: cancel, leading: make(chan struct{}), audited: make(chan struct{}), served: make(chan struct{})}
	go func() {
		defer close(m.served)
		m.serveErr = srv.Serve()
	}()
	go func() {
		defer close(m.leading)
		leader.Run(ctx, srv, leader.Options{Signals: srv.Dispatcher(), Mover: srv.Sessions(), Registry: cfg.Registry,
			Period: cfg.LeaderCheck, Logger: cfg.Server.Logger, Passed: passed})
	}()
	go func() {
		defer close(m.audited)
		(&audit.Flusher{Recorder: srv.AuditRecorder(), Store: srv.AuditStore, Hand: srv.HandAudit,
			Retention: cfg.Audit, Logger: cfg.Server.Logger}).Run(ctx)
	}()
	return m, nil
}

// Server is the manager's port: its address, node id, credentials and,
// once a manager, its store and dispatcher.
func (m *Manager) Server() *server.Server { return m.srv }

// Done is closed when the port stops serving, on Stop or on a failure of
// its listener (Stop then says which).
func (m *Manager) Done() <-chan struct{} { return m.served }

// Stop ends the leader's work, then stops the port as server.Server.Stop
// does (calls in flight finish, watches end, the store closes), and
// returns what ended serving: nil after a clean stop.
func (m *Manager) Stop() error {
	m.stopOnce.Do(func() {
		m.cancel()
		<-m.leading
		<-m.audited
		m.srv.Stop()
		<-m.served
	})
	return m.serveErr
}

// Kill stops as a crash would: the port first (calls in flight fail, the
// store closes without handing anything over), then the leader's work,
// which finds its store gone. It returns what ended serving.
func (m *Manager) Kill() error {
	m.stopOnce.Do(func() {
		m.srv.Kill()
		m.cancel()
		<-m.leading
		<-m.audited
		<-m.served
	})
	return m.serveErr
}
