package main

import (
	"github.com/spf13/cobra"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "0.1.0-dev"

func newRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:           "legion",
		Short:         "Legion: a container orchestrator for FreeBSD",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newValidateCommand(), newVersionCommand(), newNodeResolverCommand(), newUpCommand(), newImageCommand(), newLogsCommand(), newExecCommand(), newPortForwardCommand(), newVolumeCommand())
	addClusterCommands(root)
	addStackCommands(root)
	addOpsCommands(root)
	addAutolockCommands(root)
	addBackupCommands(root)
	addAuditCommands(root)
	return root
}

func newVersionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print Legion's version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cmd.Printf("legion %s (object model %s)\n", version, "legion/v1")
			return nil
		},
	}
}
