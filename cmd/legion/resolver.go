package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"syscall"

	"github.com/legionbsd/legion/netbsd/resolver"
	"github.com/spf13/cobra"
)

func newNodeResolverCommand() *cobra.Command {
	var listen, zone, resolvConf, build string
	var upstreams, watch []string
	cmd := &cobra.Command{
		Use:   "node-resolver --listen ADDR --zone FILE",
		Short: "Serve the node's DNS: cluster names from the zone file, the rest forwarded",
		// The daemon starts it; nobody runs it by hand.
		Hidden: true,
		Long: `node-resolver answers the cluster's names under "legion." from the zone file
the agent keeps up to date, and forwards every other name to the host's
resolvers. It runs apart from the daemon so pods resolve names while the
daemon restarts, and stops by itself once its zone file is removed.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if listen == "" || zone == "" {
				return fmt.Errorf("node-resolver: --listen and --zone are required")
			}
			if len(upstreams) == 0 {
				ups, err := resolver.HostUpstreams(resolvConf, listen)
				if err != nil {
					return fmt.Errorf("node-resolver: %w (or give --upstream)", err)
				}
				upstreams = ups
			}
			pc, l, err := resolver.Listen(listen)
			if err != nil {
				return fmt.Errorf("node-resolver: %w", err)
			}
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			log := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), nil))
			// Its pid beside the zone, for a daemon of another build to
			// stop it (daemon.StartResolverProcess).
			pidFile := resolver.PidFile(zone)
			if err := os.WriteFile(pidFile, []byte(strconv.Itoa(os.Getpid())+"\n"), 0o600); err != nil {
				log.Warn("node resolver: its pid file", "err", err)
			}
			defer os.Remove(pidFile)
			log.Info("node resolver serving", "listen", listen, "zone", zone, "upstreams", upstreams, "build", build)
			s := &resolver.Server{ZoneFile: zone, Upstreams: upstreams, Logger: log, Watch: watch, Build: build}
			return s.Serve(ctx, pc, l)
		},
	}
	cmd.Flags().StringVar(&listen, "listen", "", "address to answer on (the node's bridge gateway, port 53)")
	cmd.Flags().StringVar(&zone, "zone", "", "zone file the agent writes (<run dir>/resolver/zone.json)")
	cmd.Flags().StringSliceVar(&upstreams, "upstream", nil, "resolvers for other names, host:port (default: the host's)")
	cmd.Flags().StringSliceVar(&watch, "watch", nil, "stop once this path is gone too (the node's data directory)")
	cmd.Flags().StringVar(&resolvConf, "resolv-conf", "/etc/resolv.conf", "where the host's resolvers are listed")
	cmd.Flags().StringVar(&build, "build", "", "the build of Legion that started it, answered to version.bind (CHAOS)")
	return cmd
}
