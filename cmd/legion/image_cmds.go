package main

import (
	"fmt"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/legionbsd/legion/image"
	"github.com/legionbsd/legion/internal/daemon"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// newImageCommand works on this node's image store directly: the store
// takes a file lock while it changes, so these run beside a daemon that
// pulls.
func newImageCommand() *cobra.Command {
	var o daemon.Options
	open := func() (*image.Images, error) { return daemon.OpenImages(o, nil) }
	cmd := &cobra.Command{Use: "image", Short: "Load, list and remove the images of this node"}
	cmd.PersistentFlags().StringVar(&o.DataDir, "data-dir", ".legion", "the node's data directory")
	platformFlags(cmd.PersistentFlags(), &o)
	load := &cobra.Command{
		Use:   "load FILE [--name REF]",
		Short: "Add an image from an OCI archive, an OCI layout tar or docker save's tar",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name, _ := cmd.Flags().GetString("name")
			m, err := open()
			if err != nil {
				return err
			}
			defer m.Close()
			f, err := os.Open(args[0])
			if err != nil {
				return err
			}
			defer f.Close()
			recs, err := m.Load(ctxOf(cmd), f, name, time.Now())
			if err != nil {
				return err
			}
			for _, r := range recs {
				fmt.Fprintf(cmd.OutOrStdout(), "Loaded %s (%s, %s/%s)\n", r.Reference, short(r.Digest), r.Platform.OS, r.Platform.Arch)
			}
			return nil
		},
	}
	load.Flags().String("name", "", "name the image (a localhost/ name when the archive gives none)")
	ls := &cobra.Command{
		Use:     "ls",
		Aliases: []string{"list"},
		Short:   "List the images of this node",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			m, err := open()
			if err != nil {
				return err
			}
			defer m.Close()
			recs, err := m.List()
			if err != nil {
				return err
			}
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "REFERENCE\tDIGEST\tPLATFORM\tLAYERS\tORIGIN\tLAST USED")
			for _, r := range recs {
				origin := "pulled"
				if r.Local {
					origin = "loaded"
				}
				if r.Private {
					origin += ", private to " + strings.Join(r.Namespaces, ",")
				}
				fmt.Fprintf(w, "%s\t%s\t%s/%s\t%d\t%s\t%s\n", r.Reference, short(r.Digest), r.Platform.OS, r.Platform.Arch,
					len(r.Layers), origin, r.LastUsed.Format(time.RFC3339))
			}
			return w.Flush()
		},
	}
	rm := &cobra.Command{
		Use:   "rm REF",
		Short: "Remove an image, and the layers no other image or container uses",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			m, err := open()
			if err != nil {
				return err
			}
			defer m.Close()
			gone, err := m.Remove(ctxOf(cmd), args[0])
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Removed %s (%d layers freed)\n", args[0], len(gone))
			return nil
		},
	}
	cmd.AddCommand(load, ls, rm)
	return cmd
}

func short(digest string) string {
	d := strings.TrimPrefix(digest, "sha256:")
	if len(d) > 12 {
		d = d[:12]
	}
	return d
}

// platformFlags are the flags that say what a node runs pods on.
func platformFlags(fs *pflag.FlagSet, o *daemon.Options) {
	fs.StringVar(&o.Platform, "platform", daemon.DefaultPlatform(),
		"what pods run on: jails (FreeBSD jails on ZFS, pf network) or process (host processes on loopback, isolating nothing)")
	fs.StringVar(&o.ZFSRoot, "zfs-root", daemon.DefaultZFSRoot, "the dataset images and container roots live under (jails)")
}
