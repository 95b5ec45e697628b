package main

import (
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/legionbsd/legion/cluster/server"
	"github.com/spf13/cobra"
)

func newDaemonCommand() *cobra.Command {
	var dataDir, listen, advertise string
	cmd := &cobra.Command{
		Use:   "daemon --data-dir DIR [--listen ADDR] [--advertise ADDR]",
		Short: "Run the node daemon (and, once initialised or joined as one, the manager)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if dataDir == "" {
				return fmt.Errorf("--data-dir is required")
			}
			log := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: slog.LevelInfo}))
			s, err := server.New(server.Config{DataDir: dataDir, Listen: listen, Advertise: advertise, Logger: log})
			if err != nil {
				return err
			}
			log.Info("legion daemon listening", "addr", s.Addr(), "advertise", s.Advertise(), "node", s.NodeID())
			ctx, stop := signal.NotifyContext(ctxOf(cmd), os.Interrupt, syscall.SIGTERM)
			defer stop()
			done := make(chan error, 1)
			go func() { done <- s.Serve() }()
			select {
			case <-ctx.Done():
				log.Info("stopping: no new calls, ending watches, closing the store")
				s.Stop()
				return <-done
			case err := <-done:
				s.Stop()
				return err
			}
		},
	}
	cmd.Flags().StringVar(&dataDir, "data-dir", "", "the node's data directory (store, certificates, node id)")
	cmd.Flags().StringVar(&listen, "listen", fmt.Sprintf("0.0.0.0:%d", server.DefaultPort), "address of the gRPC port")
	cmd.Flags().StringVar(&advertise, "advertise", "", "address other managers reach this one at (default: the listen address, loopback when unspecified)")
	return cmd
}
