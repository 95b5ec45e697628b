package main

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/client"
	"github.com/legionbsd/legion/cluster/pki"
	"github.com/spf13/cobra"
)

// addAutolockCommands adds legion autolock and legion unlock.
func addAutolockCommands(root *cobra.Command) {
	cli := newClusterCLI()
	root.AddCommand(cli.autolockCommand(), cli.unlockCommand())
}

func (c *clusterCLI) autolockCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "autolock",
		Short: "Seal the managers' private keys under an unlock key the operator keeps",
		Long: `With autolock on, every manager keeps its private keys (CA, node, store
data key, WireGuard) sealed under an unlock key, and a manager that
restarts serves nothing until legion unlock gives it that key. Keep the
key safe: a restarted manager cannot start without it.`,
	}
	for _, a := range []struct{ action, short string }{
		{client.AutolockEnable, "Turn autolock on and print the new unlock key (keep it: it is shown by show only)"},
		{client.AutolockShow, "Print the unlock key in effect"},
		{client.AutolockRotate, "Replace the unlock key and print the new one; managers reseal under it"},
		{client.AutolockDisable, "Turn autolock off; managers write their keys in the clear again"},
	} {
		cmd.AddCommand(&cobra.Command{
			Use:   a.action,
			Short: a.short,
			Args:  cobra.NoArgs,
			RunE: func(cmd *cobra.Command, _ []string) error {
				cl, err := c.connect(cmd)
				if err != nil {
					return err
				}
				defer cl.Close()
				r, err := cl.Autolock(ctxOf(cmd), a.action)
				if err != nil {
					return fmt.Errorf("autolock %s: %w", a.action, err)
				}
				out, errw := cmd.OutOrStdout(), cmd.ErrOrStderr()
				done := r.LeaderKeys == ""
				if !done {
					fmt.Fprintf(errw, "warning: the leader could not change its own private keys yet (it tries again every 5 s): %s\n", r.LeaderKeys)
				}
				switch {
				case a.action == client.AutolockDisable && done:
					fmt.Fprintln(out, "autolock is off: the leader has written its private keys in the clear, the other managers do within 5 s")
				case a.action == client.AutolockDisable:
					fmt.Fprintln(out, "autolock is off: the managers write their private keys in the clear within 5 s, the leader once it can")
				case a.action == client.AutolockShow:
					fmt.Fprintln(out, r.Key)
				default:
					fmt.Fprintln(out, r.Key) // alone on standard output, for scripts
					which := "The leader has sealed its private keys under this key, the other managers do within 5 s"
					if !done {
						which = "The managers seal their private keys under this key within 5 s, the leader once it can"
					}
					fmt.Fprintln(errw, which+": from then on a manager that restarts serves nothing until legion unlock gives it the key.")
				}
				return nil
			},
		})
	}
	return cmd
}

// readUnlockKeyFile reads an unlock key from a file.
func readUnlockKeyFile(path string) (pki.UnlockKey, error) {
	f, err := os.Open(path)
	if err != nil {
		return pki.UnlockKey{}, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxKeyInput+1))
	if err != nil {
		return pki.UnlockKey{}, err
	}
	if len(data) > maxKeyInput {
		return pki.UnlockKey{}, fmt.Errorf("%s holds more than %d bytes: expected one LGN-UNLOCK-... key", path, maxKeyInput)
	}
	return pki.ParseUnlockKey(string(data))
}

// maxKeyInput bounds what is read as an unlock key.
const maxKeyInput = 4096

func (c *clusterCLI) unlockCommand() *cobra.Command {
	var keyFile string
	cmd := &cobra.Command{
		Use:   "unlock [--key-file F]",
		Short: "Give a locked manager of this host its unlock key (read from stdin without --key-file)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var in io.Reader = cmd.InOrStdin()
			what := "stdin"
			if keyFile != "" {
				f, err := os.Open(keyFile)
				if err != nil {
					return fmt.Errorf("unlock: --key-file: %w", err)
				}
				defer f.Close()
				in, what = f, keyFile
			}
			data, err := io.ReadAll(io.LimitReader(in, maxKeyInput+1))
			if err != nil {
				return fmt.Errorf("unlock: reading the key from %s: %w", what, err)
			}
			if len(data) > maxKeyInput {
				return fmt.Errorf("unlock: %s holds more than %d bytes: expected one LGN-UNLOCK-... key", what, maxKeyInput)
			}
			key := strings.TrimSpace(string(data))
			if key == "" {
				return fmt.Errorf("unlock: no key in %s: give the LGN-UNLOCK-... key there or with --key-file", what)
			}
			cl, err := c.bare(cmd, c.server(cmd))
			if err != nil {
				return err
			}
			defer cl.Close()
			id, err := cl.Unlock(ctxOf(cmd), key)
			if err != nil {
				return fmt.Errorf("unlock: %w", err)
			}
			confirm(cmd.OutOrStdout(), string(legion.KindNode), id, "unlocked")
			return nil
		},
	}
	cmd.Flags().StringVar(&keyFile, "key-file", "", "file holding the unlock key (default: read it from stdin)")
	return cmd
}
