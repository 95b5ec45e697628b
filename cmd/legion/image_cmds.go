package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
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
	// Listing or removing where there is no node would make an empty store
	// there and say it holds nothing; load may make one for a node to
	// start on.
	openExisting := func() (*image.Images, error) {
		if _, err := os.Stat(o.DataDir); errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("no node data directory at %s: give --data-dir, the one legion up or legion daemon uses (legion up's default is .legion where it was started)", o.DataDir)
		}
		return open()
	}
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
				confirm(cmd.OutOrStdout(), "image", r.Reference, "loaded", fmt.Sprintf("(%s, %s/%s)", short(r.Digest), r.Platform.OS, r.Platform.Arch))
			}
			return nil
		},
	}
	load.Flags().String("name", "", "name the image (a localhost/ name when the archive gives none)")
	var output string
	ls := &cobra.Command{
		Use:     "ls",
		Aliases: []string{"list"},
		Short:   "List the images of this node",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			fm, err := parseOutput(output)
			if err != nil {
				return err
			}
			m, err := openExisting()
			if err != nil {
				return err
			}
			defer m.Close()
			recs, err := m.List()
			if err != nil {
				return err
			}
			l := imageListing(recs)
			return l.print(cmd.OutOrStdout(), cmd.ErrOrStderr(), fm)
		},
	}
	outputFlag(ls, &output)
	var force bool
	rm := &cobra.Command{
		Use:   "rm REF [--force]",
		Short: "Remove an image, and the layers no other image or container uses",
		Long: `Remove an image, and the layers no other image or container uses. An
image a container of this node was made from is refused, as docker rmi
refuses it: the container runs on, but its task could not start again on
this node from a local image (pullPolicy: never), nor restart once its
container is gone. --force removes it all the same.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			m, err := openExisting()
			if err != nil {
				return err
			}
			defer m.Close()
			if !force {
				roots, err := m.RootsOf(ctxOf(cmd), args[0])
				if err != nil {
					return err
				}
				if len(roots) > 0 {
					ids := make([]string, len(roots))
					for i, r := range roots {
						ids[i] = r.ID
					}
					return fmt.Errorf("image %s: %d container(s) of this node were made from its content (%s): their tasks could not be started again here from it; stop them first, or remove it anyway with --force",
						args[0], len(roots), strings.Join(ids, ", "))
				}
			}
			gone, err := m.Remove(ctxOf(cmd), args[0])
			if err != nil {
				return err
			}
			confirm(cmd.OutOrStdout(), "image", args[0], "removed", "("+counted(len(gone), "layer")+" freed)")
			return nil
		},
	}
	rm.Flags().BoolVarP(&force, "force", "f", false, "remove the image even though containers of this node were made from it")
	// docker pull's habit: refused saying how images get onto nodes.
	pull := &cobra.Command{Use: "pull", Hidden: true, DisableFlagParsing: true,
		RunE: func(*cobra.Command, []string) error {
			return errors.New("legion image pull: " + imagePulls)
		}}
	cmd.AddCommand(load, ls, rm, pull)
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
		"what pods run on: jails (FreeBSD jails on ZFS, pf network) or process (host processes, in a network namespace per pod or on loopback as --pod-network says, isolating nothing else)")
	fs.StringVar(&o.ZFSRoot, "zfs-root", daemon.DefaultZFSRoot, "the dataset images and container roots live under (jails)")
	fs.BoolVar(&o.Linux, "linux", false,
		"also run Linux images of this architecture when an image has no FreeBSD build (jails: through the Linux ABI, which the node loads, and placement's node.platform.linux == true); a process node on Linux runs them with or without it")
	fs.StringVar(&o.PodNetwork, "pod-network", "",
		"the process platform's pod network: auto (the default: a Linux network namespace per pod where this host allows it, as root, else loopback), netns (insist on namespaces) or loopback (pods share the host's network)")
}

// podNetworkOf is the pod network a node asks for: the flag's, or auto on
// the process platform (jails have theirs and take no choice).
func podNetworkOf(o daemon.Options) string {
	if o.PodNetwork == "" && o.Platform == daemon.PlatformProcess {
		return daemon.PodNetworkAuto
	}
	return o.PodNetwork
}
