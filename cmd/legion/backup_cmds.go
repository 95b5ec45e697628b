package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/legionbsd/legion/cluster/server"
	"github.com/legionbsd/legion/internal/daemon"
	"github.com/spf13/cobra"
)

// addBackupCommands adds legion backup and legion restore (3.7).
func addBackupCommands(root *cobra.Command) {
	cli := newClusterCLI()
	root.AddCommand(cli.backupCommand(), restoreCommand())
}

func (c *clusterCLI) backupCommand() *cobra.Command {
	var out string
	var force bool
	cmd := &cobra.Command{
		Use:   "backup -o FILE",
		Short: "Back up the control state: every object, Secrets and join tokens among them",
		Long: `Back up the control state, read by the leader at one version, to FILE
(mode 0600, written aside and renamed once whole). It holds Secrets and
join tokens: keep it as safe as the managers' keys. The managers' keys
(<data-dir>/pki and node-id) are not in it: keep them beside it. Volume
data is backed up per volume (legion volume backup).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if out == "" {
				return errors.New("backup: -o FILE: where to write the backup is required")
			}
			if _, err := os.Stat(out); err == nil && !force {
				return fmt.Errorf("backup: %s exists: give --force to replace it", out)
			}
			cl, err := c.connect(cmd)
			if err != nil {
				return err
			}
			defer cl.Close()
			n, err := writeAtomically(out, func(w io.Writer) error { return cl.Backup(cmd.Context(), w) })
			if err != nil {
				return fmt.Errorf("backup: %w", err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "control state backed up to %s (%d bytes); it holds Secrets and join tokens: keep it as safe as the managers' pki directories, which are not in it\n", out, n)
			return nil
		},
	}
	cmd.Flags().StringVarP(&out, "output", "o", "", "the backup file to write")
	cmd.Flags().BoolVar(&force, "force", false, "replace FILE if it exists")
	return cmd
}

func restoreCommand() *cobra.Command {
	var o server.RestoreOptions
	var unlockFile string
	cmd := &cobra.Command{
		Use:   "restore [FILE] --data-dir DIR",
		Short: "Rewrite a stopped manager's store as a cluster of one, from a backup or from itself",
		Long: `Restore runs offline on a stopped manager's data directory, with its pki
and node-id in place. With FILE, the old store is set aside and the
backup's objects are written at the backup's version; without FILE the
manager's own store is kept and every entry of its log taken as committed,
for a cluster that lost its quorum for good. Either way this manager
becomes the only voter: start its daemon, then join the other managers
again from empty data directories with the backed-up join token. Given
legion up's data directory, it restores the manager legion up keeps there,
which legion up then starts again. It is refused while a daemon holds the
directory.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if o.DataDir == "" {
				return errors.New("restore: --data-dir: the stopped manager's data directory is required")
			}
			// legion up keeps its manager in a directory of its own; its
			// user names the one legion up was given.
			upDir := ""
			if m := daemon.UpManagerDir(o.DataDir); !exists(filepath.Join(o.DataDir, server.NodeIDFile)) && exists(filepath.Join(m, server.NodeIDFile)) {
				upDir, o.DataDir = o.DataDir, m
				fmt.Fprintf(cmd.ErrOrStderr(), "note: %s is legion up's data directory: restoring its manager, %s\n", upDir, m)
			}
			from := "its own store"
			if len(args) == 1 {
				f, err := os.Open(args[0])
				if err != nil {
					return fmt.Errorf("restore: %w", err)
				}
				defer f.Close()
				o.Backup, from = f, args[0]
			}
			if unlockFile != "" {
				k, err := readUnlockKeyFile(unlockFile)
				if err != nil {
					return fmt.Errorf("restore: --unlock-key-file: %w", err)
				}
				o.UnlockKey = &k
			}
			res, err := server.Restore(o)
			if err != nil {
				return fmt.Errorf("restore: %w", err)
			}
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "manager %s restored from %s at version %d", res.NodeID, from, res.Version)
			if o.Backup != nil {
				fmt.Fprintf(w, " (%d objects)", res.Objects)
			}
			fmt.Fprintln(w)
			for _, p := range res.SetAside {
				fmt.Fprintf(w, "the old store is set aside as %s\n", p)
			}
			if upDir != "" {
				fmt.Fprintf(w, "start it again with legion up --data-dir %s\n", upDir)
				return nil
			}
			addr := res.Address
			if addr == "" {
				addr = "the address its membership recorded"
			}
			fmt.Fprintf(w, "start its daemon: it leads a cluster of one at %s; then join the other managers from empty data directories\n", addr)
			return nil
		},
	}
	cmd.Flags().StringVar(&o.DataDir, "data-dir", "", "the stopped manager's data directory")
	cmd.Flags().StringVar(&o.Advertise, "advertise", "", "the address the manager will lead at (default: as the backup or its store records it)")
	cmd.Flags().StringVar(&unlockFile, "unlock-key-file", "", "file holding the unlock key of a manager whose keys are sealed (autolock)")
	return cmd
}
