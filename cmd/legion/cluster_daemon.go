package main

import (
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/legionbsd/legion/cluster/audit"
	"github.com/legionbsd/legion/cluster/manager"
	"github.com/legionbsd/legion/cluster/server"
	"github.com/legionbsd/legion/internal/agent/attach"
	"github.com/legionbsd/legion/internal/daemon"
	"github.com/legionbsd/legion/sys"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"
)

func newDaemonCommand() *cobra.Command {
	var dataDir, listen, advertise, runDir, dnsListen string
	var managers []string
	var noAgent bool
	var auditDays, auditMax int
	var po daemon.Options // the platform flags
	var timingName *string
	var vip vipFlags
	cmd := &cobra.Command{
		Use:   "daemon --data-dir DIR [--listen ADDR] [--advertise ADDR]",
		Short: "Run the node daemon: its agent and, once initialised or joined as one, the manager",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			daemon.SetGC()
			if dataDir == "" {
				return fmt.Errorf("--data-dir is required")
			}
			if auditDays < 1 || auditMax < 1 {
				return fmt.Errorf("--audit-retention-days %d, --audit-max-events %d: each must be at least 1", auditDays, auditMax)
			}
			timing, err := raftTiming(*timingName)
			if err != nil {
				return err
			}
			carp, err := vip.carp(po.Platform, listen)
			if err != nil {
				return err
			}
			if carp != nil {
				carp.Runner = sys.Exec{}
				if err := carp.Setup(ctxOf(cmd)); err != nil {
					return err
				}
			}
			log := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: slog.LevelInfo}))
			var metrics prometheus.Registerer // --metrics-listen's registry
			if po.MetricsListen != "" {
				ms, err := daemon.ServeMetrics(po.MetricsListen, log)
				if err != nil {
					return err
				}
				defer ms.Close()
				metrics = ms.Registry
			}
			ranges, release := daemon.Ranges(po)
			defer release()
			m, err := manager.Start(manager.Config{Server: server.Config{DataDir: dataDir, Listen: listen, Advertise: advertise, Logger: log, Metrics: metrics, Timing: timing,
				Ranges: ranges},
				Audit: audit.Retention{Age: time.Duration(auditDays) * 24 * time.Hour, MaxEvents: auditMax}})
			if err != nil {
				return err
			}
			s := m.Server()
			log.Info("legion daemon listening", "addr", s.Addr(), "advertise", s.Advertise(), "node", s.NodeID())
			ctx, stop := signal.NotifyContext(ctxOf(cmd), os.Interrupt, syscall.SIGTERM)
			defer stop()
			if carp != nil {
				carpDone := make(chan struct{})
				go func() { defer close(carpDone); daemon.RunCARP(ctx, *carp, daemon.ServerRole(s), log) }()
				// Given up before the daemon exits, so another manager
				// takes the address at once.
				defer func() { stop(); <-carpDone }()
			}
			agentDone := make(chan error, 1)
			if noAgent {
				agentDone <- nil
			} else {
				// Every node flag reaches the agent: the options start from
				// them rather than naming each (one once went missing so).
				ao := po
				ao.DataDir, ao.RunDir, ao.DNSListen, ao.Logger = dataDir, runDir, dnsListen, log
				ao.ResolverProcess, ao.Metrics, ao.PodNetwork = true, metrics, podNetworkOf(po)
				go func() { agentDone <- daemon.RunAgent(ctx, s, ao, managers) }()
			}
			select {
			case <-ctx.Done():
				log.Info("stopping: the agent leaves its pods running, then no new calls, ending watches, closing the store")
				if err := <-agentDone; err != nil {
					log.Error("agent", "err", err)
				}
				return m.Stop()
			case err := <-agentDone:
				if err != nil {
					stop()
					m.Stop()
					return fmt.Errorf("agent: %w", err)
				}
				select {
				case <-ctx.Done():
				case <-m.Done():
				}
				return m.Stop()
			case <-m.Done():
				stop()
				<-agentDone
				return m.Stop()
			}
		},
	}
	cmd.Flags().StringVar(&dataDir, "data-dir", "", "the node's data directory (store, certificates, node id)")
	cmd.Flags().StringVar(&listen, "listen", fmt.Sprintf("0.0.0.0:%d", server.DefaultPort), "address of the gRPC port")
	cmd.Flags().StringSliceVar(&managers, "manager", nil, "a manager's address for this node's agent (default on a worker: the one it joined through; it learns the others)")
	cmd.Flags().StringVar(&runDir, "run-dir", "", "where tasks' secrets live, memory-backed and outside the data directory (default: under /dev/shm or the temporary directory)")
	cmd.Flags().StringVar(&dnsListen, "dns-listen", "", dnsListenHelp)
	cmd.Flags().BoolVar(&noAgent, "no-agent", false, "run no agent: a manager that runs no tasks (it still schedules, allocates and resolves when it leads)")
	platformFlags(cmd.Flags(), &po)
	metricsFlag(cmd.Flags(), &po)
	timingName = raftTimingFlag(cmd.Flags())
	ingressFlags(cmd, &po)
	evictionFlags(cmd, &po)
	cmd.Flags().StringVar(&po.ExtIf, "ext-if", "", "the interface published ports arrive on (jails; default: the default route's)")
	cmd.Flags().BoolVar(&po.PFMain, "pf-main", false, "on a jails node whose pf main ruleset is empty, load one of just the calls of Legion's anchors (one with rules of its own is never replaced)")
	cmd.Flags().StringVar(&po.VolumePlugins, "volume-plugins", attach.DefaultPluginDir, "the directory of volume plugin executables (driver: plugin)")
	cmd.Flags().StringVar(&advertise, "advertise", "", "address other managers reach this one at (default: the listen address, loopback when unspecified)")
	vip.register(cmd.Flags())
	cmd.Flags().IntVar(&auditDays, "audit-retention-days", int(audit.DefaultRetention/(24*time.Hour)), "days the leader keeps audit events")
	cmd.Flags().IntVar(&auditMax, "audit-max-events", audit.DefaultMaxEvents, "most audit events the leader keeps (the oldest go first)")
	return cmd
}
