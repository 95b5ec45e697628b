package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/client"
	"github.com/spf13/cobra"
)

// volumeMovePoll is how often `volume move --wait` reads the Volume again.
const volumeMovePoll = 500 * time.Millisecond

// volumeMoveTimeout is how long `volume move --wait` follows a move by
// default: a full copy of a big Volume takes a while.
const volumeMoveTimeout = 30 * time.Minute

// maxHeaderLine bounds a backup file's first line: a header is a few
// hundred bytes, labels included; anything longer is not one.
const maxHeaderLine = 1 << 20

// fileBuffer is the buffer between the stream and a backup file.
const fileBuffer = 1 << 20

// newVolumeCommand is `legion volume`: the Volumes' state, their moves
// between nodes, and their data's backups.
func newVolumeCommand() *cobra.Command {
	c := newClusterCLI()
	cmd := &cobra.Command{
		Use:     "volume",
		Aliases: []string{"volumes", "vol"},
		Short:   "List Volumes, move one to another node, back one up or restore it",
	}
	cmd.AddCommand(c.volumeListCommand(), c.volumeGetCommand(), c.volumeMoveCommand(), c.volumeBackupCommand(), c.volumeRestoreCommand())
	return cmd
}

func (c *clusterCLI) volumeListCommand() *cobra.Command {
	var ns, output string
	var all bool
	cmd := &cobra.Command{
		Use:     "ls",
		Aliases: []string{"list"},
		Short:   "List Volumes with their driver, size, node, state and the tasks using them",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			fm, err := parseOutput(output)
			if err != nil {
				return err
			}
			cl, err := c.connect(cmd)
			if err != nil {
				return err
			}
			defer cl.Close()
			opts := client.ListOptions{Namespace: ns, AllNamespaces: all}
			vols, _, err := cl.List(ctxOf(cmd), legion.KindVolume, opts)
			if err != nil {
				return err
			}
			l := objectListing(vols, all, false, time.Now())
			l.none, l.scope = "volumes", userScope(cl, all)
			if (fm.name == "table" || fm.name == "wide") && len(vols) > 0 {
				tasks, _, err := cl.List(ctxOf(cmd), legion.KindTask, opts)
				if err != nil {
					return err
				}
				addVolumeUsers(&l, vols, volumeUsers(tasks))
			}
			return l.print(cmd.OutOrStdout(), cmd.ErrOrStderr(), fm)
		},
	}
	cmd.Flags().StringVarP(&ns, "namespace", "n", "", "namespace (default: default)")
	cmd.Flags().BoolVarP(&all, "all-namespaces", "A", false, "every namespace")
	outputFlag(cmd, &output)
	return cmd
}

// addVolumeUsers adds the USED BY column: the tasks mounting each Volume.
func addVolumeUsers(l *listing, vols []legion.Object, users map[string][]string) {
	var cells []string
	for _, o := range vols {
		m := o.GetMetadata()
		cells = append(cells, strings.Join(users[volumeKey(m.Namespace, m.Name)], ","))
	}
	l.addColumn("USED BY", cells)
}

func volumeKey(ns, name string) string { return ns + "/" + name }

// volumeUsers maps each Volume (namespace/name) to the tasks that mount
// it and have not ended, sorted by name.
func volumeUsers(tasks []legion.Object) map[string][]string {
	users := map[string][]string{}
	for _, o := range tasks {
		t := o.(*legion.Task)
		if t.Status.State.Terminal() {
			continue
		}
		seen := map[string]bool{}
		for _, vol := range t.Spec.Volumes {
			k := volumeKey(t.Metadata.Namespace, vol)
			if !seen[k] {
				seen[k] = true
				users[k] = append(users[k], t.Metadata.Name)
			}
		}
	}
	for _, names := range users {
		slices.Sort(names)
	}
	return users
}

func sizeOf(v *legion.Volume) string {
	if v.Spec.Size == 0 {
		return "-"
	}
	return v.Spec.Size.String()
}

// volumeState is the STATE column: bound, free, or the move under way.
func volumeState(v *legion.Volume) string {
	st := v.State()
	if m := v.Status.Migration; st == legion.VolumeMoving && m != nil {
		return fmt.Sprintf("moving %s→%s (%s)", m.From, m.To, m.State)
	}
	return string(st)
}

func (c *clusterCLI) volumeGetCommand() *cobra.Command {
	var ns, output string
	cmd := &cobra.Command{
		Use:   "get NAME",
		Short: "Show a Volume: where its data is, how it is kept, its move, snapshots and users",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			fm, err := parseOutput(output)
			if err != nil {
				return err
			}
			cl, err := c.connect(cmd)
			if err != nil {
				return err
			}
			defer cl.Close()
			v, err := client.GetAs[*legion.Volume](ctxOf(cmd), cl, legion.KindVolume, ns, args[0])
			if err != nil {
				return fmt.Errorf("volume %s: %w", args[0], err)
			}
			if fm.name != "table" && fm.name != "wide" {
				l := objectListing([]legion.Object{v}, false, true, time.Now())
				return l.print(cmd.OutOrStdout(), cmd.ErrOrStderr(), fm)
			}
			tasks, _, err := cl.List(ctxOf(cmd), legion.KindTask, client.ListOptions{Namespace: v.Metadata.Namespace})
			if err != nil {
				return err
			}
			return printVolume(cmd.OutOrStdout(), v, tasks, time.Now())
		},
	}
	cmd.Flags().StringVarP(&ns, "namespace", "n", "", "namespace (default: default)")
	outputFlag(cmd, &output)
	return cmd
}

// printVolume writes a Volume's details, one field a line.
func printVolume(out io.Writer, v *legion.Volume, tasks []legion.Object, now time.Time) error {
	w := tabwriter.NewWriter(out, 0, 4, 1, ' ', 0)
	line := func(k, format string, a ...any) { fmt.Fprintf(w, "%s:\t"+format+"\n", append([]any{k}, a...)...) }
	line("Name", "%s", legion.DisplayName(v))
	line("Labels", "%s", labelString(v.Metadata.Labels))
	line("Driver", "%s", v.Spec.Driver)
	switch {
	case v.Spec.NFS != nil:
		line("Export", "%s:%s %s", v.Spec.NFS.Server, v.Spec.NFS.Path, v.Spec.NFS.Options)
	case v.Spec.ISCSI != nil:
		line("Target", "%s %s lun %d", v.Spec.ISCSI.Portal, v.Spec.ISCSI.Target, v.Spec.ISCSI.LUN)
	case v.Spec.Plugin != nil:
		line("Plugin", "%s (shared: %v)", v.Spec.Plugin.Name, v.Spec.Plugin.Shared)
	}
	line("Size", "%s", sizeOf(v))
	line("Node", "%s", orDash(v.Status.Node))
	if v.Spec.Node != "" {
		line("Wanted on", "%s", v.Spec.Node)
	}
	line("Backend", "%s", orDash(v.Status.Backend))
	line("State", "%s", volumeState(v))
	if m := v.Status.Migration; m != nil {
		line("Migration", "%s from %s to %s", m.State, m.From, m.To)
		if m.Attempt > 0 {
			line("  Attempt", "%d", m.Attempt)
		}
		if m.NextAttempt != nil {
			line("  Next attempt", "%s (in %s)", m.NextAttempt.UTC().Format(time.RFC3339), max(0, m.NextAttempt.Sub(now)).Round(time.Second))
		}
		if m.Message != "" {
			line("  Message", "%s", m.Message)
		}
	}
	line("Snapshots", "%s", orDash(strings.Join(v.Status.Snapshots, ", ")))
	var users []string
	for _, o := range tasks {
		t := o.(*legion.Task)
		if t.Status.State.Terminal() || !slices.Contains(slices.Collect(maps.Values(t.Spec.Volumes)), v.Metadata.Name) {
			continue
		}
		users = append(users, fmt.Sprintf("%s (%s on %s)", t.Metadata.Name, orDash(string(t.Status.State)), orDash(t.Spec.Node)))
	}
	slices.Sort(users)
	line("Used by", "%s", orDash(strings.Join(users, ", ")))
	if v.Status.Message != "" {
		line("Message", "%s", v.Status.Message)
	}
	return w.Flush()
}

func (c *clusterCLI) volumeMoveCommand() *cobra.Command {
	var ns, node string
	var wait bool
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "move VOLUME NODE",
		Short: "Ask for a zfs Volume's data on a node (spec.node): its data moves there, its tasks follow",
		Long: `Move sets the Volume's spec.node to NODE (--node NODE says the same).
When its data is on another node, the leader copies it there while its
tasks run on; once the copy is in, the tasks using it on the old node
stop, the last changes follow, and their next tasks start on the new
node. Only zfs Volumes move: the others' data is not kept on one node.
--wait follows the move until the Volume is bound on NODE.`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 2 {
				if node != "" && node != args[1] {
					return fmt.Errorf("volume move: NODE %s and --node %s name different nodes: give one", args[1], node)
				}
				node = args[1]
			}
			if node == "" {
				return errors.New("volume move: NODE is required: legion volume move VOLUME NODE")
			}
			if cmd.Flags().Changed("timeout") && !wait {
				return errors.New("volume move: --timeout applies only with --wait")
			}
			if timeout <= 0 {
				return fmt.Errorf("volume move: --timeout %s: expected a positive duration", timeout)
			}
			if err := c.knownNode(cmd, node); err != nil {
				return fmt.Errorf("volume move: %w", err)
			}
			res, err := c.updateObject(cmd, legion.KindVolume, ns, args[0], func(o legion.Object) error {
				v := o.(*legion.Volume)
				if v.Spec.Driver != legion.DriverZFS {
					return fmt.Errorf("volume move: volume %s is %s: only zfs Volumes keep their data on one node and move", legion.DisplayName(v), v.Spec.Driver)
				}
				v.Spec.Node = node
				return nil
			})
			if err != nil {
				if errors.Is(err, client.ErrNotFound) {
					return fmt.Errorf("volume move: volume %s: %w", args[0], err)
				}
				return err
			}
			v := res.Object.(*legion.Volume)
			out := cmd.OutOrStdout()
			name := ref(v)
			switch from := v.Status.Node; {
			case from == "":
				fmt.Fprintf(out, "%s configured: it holds no data yet, and is made on %s when a task first uses it\n", name, node)
				return nil
			case from == node && v.Status.Migration == nil:
				fmt.Fprintf(out, "%s unchanged: on %s already\n", name, node)
				return nil
			default:
				fmt.Fprintf(out, "%s moving from %s to %s: its tasks on %s stop once the copy is in\n", name, from, node, from)
			}
			if !wait {
				return nil
			}
			return c.followMove(cmd, out, ns, args[0], node, timeout)
		},
	}
	cmd.Flags().StringVarP(&ns, "namespace", "n", "", "namespace (default: default)")
	cmd.Flags().StringVar(&node, "node", "", "the node to have the data on, as the NODE argument gives it")
	cmd.Flags().BoolVar(&wait, "wait", false, "follow the move until the Volume is bound on NODE")
	cmd.Flags().DurationVar(&timeout, "timeout", volumeMoveTimeout, "with --wait, how long to follow the move")
	return cmd
}

// knownNode refuses a node the cluster does not have.
func (c *clusterCLI) knownNode(cmd *cobra.Command, node string) error {
	cl, err := c.connect(cmd)
	if err != nil {
		return err
	}
	defer cl.Close()
	if _, err := cl.Get(ctxOf(cmd), legion.KindNode, "", node); err != nil {
		if errors.Is(err, client.ErrNotFound) {
			return fmt.Errorf("node %s: no such node (legion node ls lists them)", node)
		}
		return fmt.Errorf("node %s: %w", node, err)
	}
	return nil
}

// followMove reads the Volume until it is bound on node, printing each
// state it passes through, for up to timeout.
func (c *clusterCLI) followMove(cmd *cobra.Command, out io.Writer, ns, name, node string, timeout time.Duration) error {
	cl, err := c.connect(cmd)
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctxOf(cmd), timeout)
	defer cancel()
	tick := time.NewTicker(volumeMovePoll)
	defer tick.Stop()
	last := ""
	for {
		v, err := client.GetAs[*legion.Volume](ctx, cl, legion.KindVolume, ns, name)
		switch {
		case err == nil:
			if v.Status.Node == node && v.Status.Migration == nil {
				fmt.Fprintf(out, "%s moved: bound on %s\n", ref(v), node)
				return nil
			}
			if v.Spec.Node != node {
				return fmt.Errorf("volume move: volume %s: spec.node is now %q: another move replaced this one", legion.DisplayName(v), v.Spec.Node)
			}
			state := volumeState(v)
			if m := v.Status.Migration; m != nil && m.Message != "" {
				state += ": " + m.Message
			}
			if state != last {
				fmt.Fprintf(out, "%s %s\n", ref(v), state)
				last = state
			}
		case ctx.Err() == nil:
			return fmt.Errorf("volume move: volume %s: %w", name, err)
		}
		select {
		case <-ctx.Done():
			if ctxOf(cmd).Err() != nil {
				return ctxOf(cmd).Err()
			}
			return fmt.Errorf("volume move: volume %s not bound on %s after %s (last: %s)", name, node, timeout, orDash(last))
		case <-tick.C:
		}
	}
}

func (c *clusterCLI) volumeBackupCommand() *cobra.Command {
	var ns, file string
	var force bool
	cmd := &cobra.Command{
		Use:   "backup NAME -o FILE",
		Short: "Write a zfs Volume's data to a file: a header line, then its data stream",
		Long: `Backup has the Volume's node snapshot it and send all of it (a zfs send
stream, or a tar stream where the node keeps it as a directory), and writes
the stream to FILE after a header line (JSON: format, namespace, name,
labels, spec, node, time, consistency). The file is written beside FILE
with mode 0600 and takes FILE's name only once whole. From a ZFS node the
data is the Volume at one instant while its tasks ran: crash-consistent,
as after a power cut. From a directory (the process platform) it is
copied file by file while its tasks run; the header and the command say
which.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if file == "" {
				return errors.New("volume backup: -o FILE is required")
			}
			if _, err := os.Lstat(file); err == nil && !force {
				return fmt.Errorf("volume backup: %s exists; pass --force to replace it", file)
			} else if err != nil && !errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("volume backup: %w", err)
			}
			cl, err := c.connect(cmd)
			if err != nil {
				return err
			}
			defer cl.Close()
			ctx, stop := signal.NotifyContext(ctxOf(cmd), os.Interrupt, syscall.SIGTERM)
			defer stop()
			var h legion.VolumeBackupHeader
			n, err := writeAtomically(file, func(w io.Writer) error {
				var err error
				h, err = cl.BackupVolume(ctx, ns, args[0], &backupFile{w: w})
				return err
			})
			if err != nil {
				return fmt.Errorf("volume backup: volume %s: %w", args[0], err)
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "volume %s/%s backed up to %s (%d bytes of %s stream, taken on %s at %s)\n",
				h.Namespace, h.Name, file, n, orDash(h.Backend), orDash(h.Node), h.Time.UTC().Format(time.RFC3339))
			fmt.Fprintln(out, consistencyNote(h.Consistency))
			return nil
		},
	}
	cmd.Flags().StringVarP(&ns, "namespace", "n", "", "namespace (default: default)")
	cmd.Flags().StringVarP(&file, "output", "o", "", "the backup file to write")
	cmd.Flags().BoolVar(&force, "force", false, "replace FILE if it exists")
	return cmd
}

// consistencyNote says what the backup's data is as of, for the user to
// know how the application will find it.
func consistencyNote(c string) string {
	switch c {
	case legion.ConsistencyCrash:
		return "Consistency: crash-consistent. The data is as it was at one instant while its tasks ran, " +
			"as after a power cut: an application recovers it as from a crash (a database replays its log); " +
			"one that needs more must quiesce itself before the backup."
	case legion.ConsistencyFiles:
		return "Consistency: file by file. The node keeps this volume as a directory, which has no atomic snapshot: " +
			"its files were copied one after another while its tasks ran, so a file written meanwhile may not match another; " +
			"stop or quiesce the application first for data it can rely on."
	}
	return "Consistency: " + orDash(c)
}

// backupFile is a backup file's content: the header as one JSON line,
// then the stream.
type backupFile struct {
	w io.Writer
	n int64 // data bytes
}

func (b *backupFile) WriteBackupHeader(h legion.VolumeBackupHeader) error {
	line, err := json.Marshal(h)
	if err != nil {
		return err
	}
	_, err = b.w.Write(append(line, '\n'))
	return err
}

func (b *backupFile) Write(p []byte) (int, error) {
	n, err := b.w.Write(p)
	b.n += int64(n)
	return n, err
}

// writeAtomically has fill write a file that takes path's name only once
// whole: it is made 0600 beside path, synced and renamed; on any error it
// is removed. It returns the bytes written.
func writeAtomically(path string, fill func(io.Writer) error) (n int64, err error) {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, filepath.Base(path)+".tmp-*")
	if err != nil {
		return 0, err
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(tmp)
		}
	}()
	cw := &countingWriter{w: f}
	bw := bufio.NewWriterSize(cw, fileBuffer)
	if err = fill(bw); err != nil {
		return 0, err
	}
	if err = bw.Flush(); err != nil {
		return 0, fmt.Errorf("%s: %w", tmp, err)
	}
	if err = f.Sync(); err != nil {
		return 0, fmt.Errorf("%s: %w", tmp, err)
	}
	if err = f.Close(); err != nil {
		return 0, fmt.Errorf("%s: %w", tmp, err)
	}
	if err = os.Rename(tmp, path); err != nil {
		return 0, err
	}
	// The rename lasts once the directory is synced too.
	if d, derr := os.Open(dir); derr == nil {
		derr = d.Sync()
		d.Close()
		if derr != nil {
			return cw.n, fmt.Errorf("%s: synced, but its directory %s: %w", path, dir, derr)
		}
	}
	return cw.n, nil
}

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

func (c *clusterCLI) volumeRestoreCommand() *cobra.Command {
	var ns, name, node string
	var dryRun bool
	cmd := &cobra.Command{
		Use:   "restore FILE --node NODE [--name NAME] [-n NAMESPACE]",
		Short: "Make a Volume on a node from a backup file, with the backup's labels and spec",
		Long: `Restore streams a file written by legion volume backup to NODE, which
refuses it if it has data of that name; once all of it is there the
Volume is made, with the backup's labels and spec and its data on NODE.
It takes the backup's namespace and name unless -n or --name say
otherwise, and never replaces a Volume that exists.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if node == "" {
				return errors.New("volume restore: --node NODE is required: the node to restore onto")
			}
			f, err := os.Open(args[0])
			if err != nil {
				return fmt.Errorf("volume restore: %w", err)
			}
			defer f.Close()
			r := bufio.NewReaderSize(f, maxHeaderLine)
			h, err := readBackupHeader(args[0], r)
			if err != nil {
				return fmt.Errorf("volume restore: %w", err)
			}
			from := fmt.Sprintf("%s/%s (taken on %s at %s)", h.Namespace, h.Name, orDash(h.Node), h.Time.UTC().Format(time.RFC3339))
			if ns != "" {
				h.Namespace = ns
			}
			if name != "" {
				h.Name = name
			}
			h.Node = node
			target := h.Namespace + "/" + h.Name
			if err := c.restoreTarget(cmd, h); err != nil {
				return fmt.Errorf("volume restore: %w", err)
			}
			out := cmd.OutOrStdout()
			if dryRun {
				fmt.Fprintf(out, "volume %s would be restored onto %s from %s, backup of %s (dry run)\n", target, node, args[0], from)
				return nil
			}
			cl, err := c.connect(cmd)
			if err != nil {
				return err
			}
			defer cl.Close()
			v, err := cl.RestoreVolume(ctxOf(cmd), h, r)
			if err != nil {
				return fmt.Errorf("volume restore: volume %s: %w", target, err)
			}
			fmt.Fprintf(out, "volume %s restored onto %s from %s, backup of %s\n", legion.DisplayName(v), orDash(v.Status.Node), args[0], from)
			return printVolume(out, v, nil, time.Now())
		},
	}
	cmd.Flags().StringVarP(&ns, "namespace", "n", "", "namespace of the Volume made (default: the backup's)")
	cmd.Flags().StringVar(&name, "name", "", "name of the Volume made (default: the backup's)")
	cmd.Flags().StringVar(&node, "node", "", "the node to restore onto")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "check the file and the target, send nothing")
	return cmd
}

// readBackupHeader reads and checks a backup file's first line, leaving r
// at the start of the stream.
func readBackupHeader(file string, r *bufio.Reader) (legion.VolumeBackupHeader, error) {
	var h legion.VolumeBackupHeader
	line, err := r.ReadSlice('\n')
	switch {
	case errors.Is(err, bufio.ErrBufferFull):
		return h, fmt.Errorf("%s: not a Legion volume backup (no header line in its first %d bytes)", file, maxHeaderLine)
	case errors.Is(err, io.EOF):
		return h, fmt.Errorf("%s: not a Legion volume backup (no header line: %d bytes and no line end)", file, len(line))
	case err != nil:
		return h, fmt.Errorf("%s: %w", file, err)
	}
	if err := json.Unmarshal(line, &h); err != nil || h.Format == "" {
		return h, fmt.Errorf("%s: not a Legion volume backup (first line is not a JSON header with %q as its format: %s)",
			file, legion.VolumeBackupFormat, firstBytes(line))
	}
	if h.Format != legion.VolumeBackupFormat {
		return h, fmt.Errorf("%s: backup format %q; this legion reads %q", file, h.Format, legion.VolumeBackupFormat)
	}
	if h.Name == "" {
		return h, fmt.Errorf("%s: header name: missing", file)
	}
	return h, nil
}

// firstBytes quotes the start of a line for an error.
func firstBytes(line []byte) string {
	const show = 40
	line = bytes.TrimRight(line, "\n")
	if len(line) > show {
		return fmt.Sprintf("%q…", line[:show])
	}
	return fmt.Sprintf("%q", line)
}

// restoreTarget refuses a restore the cluster would refuse anyway, before
// any data goes: an unknown node, or a Volume of that name.
func (c *clusterCLI) restoreTarget(cmd *cobra.Command, h legion.VolumeBackupHeader) error {
	if err := c.knownNode(cmd, h.Node); err != nil {
		return err
	}
	cl, err := c.connect(cmd)
	if err != nil {
		return err
	}
	defer cl.Close()
	_, err = cl.Get(ctxOf(cmd), legion.KindVolume, h.Namespace, h.Name)
	switch {
	case err == nil:
		return fmt.Errorf("volume %s/%s exists: a restore never replaces a Volume (pick another with --name, or delete it first)", h.Namespace, h.Name)
	case errors.Is(err, client.ErrNotFound):
		return nil
	}
	return fmt.Errorf("volume %s/%s: %w", h.Namespace, h.Name, err)
}
