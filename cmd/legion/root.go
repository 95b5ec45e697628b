package main

import (
	"fmt"
	"runtime"
	"runtime/debug"

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
	addCACommands(root)
	return root
}

func newVersionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print Legion's version, the commit it was built from and the Go that built it",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			fmt.Fprintf(cmd.OutOrStdout(), "legion %s (commit %s, %s, object model %s)\n", version, commit(), runtime.Version(), "legion/v1")
			return nil
		},
	}
}

// commit is the VCS revision the binary was built from, as the go command
// stamped it ("unknown" when it did not: go run, -buildvcs=false).
func commit() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	rev, dirty := "", false
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if rev == "" {
		return "unknown"
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if dirty {
		rev += "+changes"
	}
	return rev
}
