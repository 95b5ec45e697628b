package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/client"
	"github.com/legionbsd/legion/cluster/server"
	"github.com/legionbsd/legion/compose"
	"github.com/legionbsd/legion/internal/agent"
	"github.com/legionbsd/legion/internal/daemon"
	"github.com/spf13/cobra"
)

func newUpCommand() *cobra.Command {
	var o daemon.Options
	var verbose bool
	var readyTimeout time.Duration
	var unlockFile string
	cmd := &cobra.Command{
		Use:   "up [DIR|FILE]",
		Short: "Run a single-node cluster in the foreground and deploy the given manifests or compose file",
		Long: `up starts a one-node cluster in this terminal (manager and agent in one
process, data under ./.legion), initialising it on first use, loads the
image archives (*.oci.tar) and applies the compose file of DIR (compose.yaml,
compose.yml, docker-compose.yaml or docker-compose.yml, the first of them, as
docker compose up reads it, leaving the other YAML files of DIR alone),
else its manifests (*.yaml, *.yml, *.json), or FILE, prints how to reach
what runs, and stops on Ctrl-C, removing its pods.

On FreeBSD pods are VNET jails on ZFS clones of their images, joined to
the legion0 bridge, with services balanced by pf (--platform jails; run it
as root, with pf.conf calling the legion/* anchors). Elsewhere, or with
--platform process, containers are plain processes of this host (chrooted
into their images when Legion runs as root): each pod gets a network
namespace of its own where the host allows it (Linux, as root;
--pod-network), else pods share the host's network in 127.0.0.0/8. Nothing else is isolated (processes,
users, limits, policy): that is for development and trying Legion out.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			daemon.SetGC()
			if err := checkRangeFlags(o.PodCIDR, o.ServiceCIDR); err != nil {
				return err
			}
			logPath, logFile, err := openUpLog(o.DataDir)
			if err != nil {
				return err
			}
			defer logFile.Close()
			o.Logger = upLogger(cmd.ErrOrStderr(), logFile, verbose)
			if unlockFile != "" {
				k, err := readUnlockKeyFile(unlockFile)
				if err != nil {
					return fmt.Errorf("--unlock-key-file: %w", err)
				}
				o.UnlockKey = k.String()
			}
			// A cluster with autolock on starts locked: say how to
			// unlock it, rather than fail or wait unexplained.
			o.Locked = func(api string) {
				fmt.Fprintf(cmd.OutOrStdout(), "The cluster in %s is locked (autolock is on): its manager's keys are sealed. "+
					"Unlock it from another terminal with legion unlock --server %s (the key on standard input, or --key-file FILE), "+
					"or start it with --unlock-key-file FILE. Waiting; Ctrl-C stops.\n", o.DataDir, api)
			}
			o.RemovePods = true
			o.ResolverProcess = true
			o.PodNetwork = podNetworkOf(o)
			// Only what this node's agent reports from now on counts as
			// ready: the store may still hold the last run's statuses.
			started := time.Now()
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			out := cmd.OutOrStdout()
			// Once up, a stop says what it does (the pods get their stop
			// grace periods) and what stays.
			var up atomic.Bool
			defer context.AfterFunc(ctx, func() {
				if up.Load() {
					fmt.Fprintln(out, "Stopping: the pods stop, each within its stop grace period.")
				}
			})()
			err = daemon.Run(ctx, o, func(n *daemon.Node) error {
				up.Store(true)
				fmt.Fprintf(out, "Legion is up: node %s, API %s (credentials %s), DNS %s.\n", n.Name, n.API, n.Admin, n.DNS)
				fmt.Fprintf(out, "Cluster ranges: pods %s, services %s.\n", n.PodCIDR, n.ServiceCIDR)
				if n.PodNetwork != "" {
					fmt.Fprintf(out, "Pod network: %s.\n", n.PodNetwork)
				}
				if !verbose {
					fmt.Fprintf(out, "Its log is %s (--verbose shows it here).\n", logPath)
				}
				if unlockFile != "" && !n.WasLocked {
					fmt.Fprintln(cmd.ErrOrStderr(), "warning: --unlock-key-file: the cluster was not locked (autolock is off), so the key was not used")
				}
				if line, err := rememberCluster(cmd, o.DataDir, n.API, n.Admin); err != nil {
					fmt.Fprintf(cmd.ErrOrStderr(), "warning: no context for this cluster: %v\n", err)
				} else if line != "" {
					fmt.Fprintln(out, line)
				}
				if len(n.Ingress) > 0 {
					fmt.Fprintf(out, "Routes are served at %s.\n", strings.Join(n.Ingress, " and "))
				}
				if len(args) == 0 {
					fmt.Fprintln(out, "Nothing to deploy. Press Ctrl-C to stop.")
					return nil
				}
				if err := deploy(ctx, cmd, n, args[0], started, readyTimeout); err != nil {
					return err
				}
				fmt.Fprintln(out, "Press Ctrl-C to stop; the pods go with it.")
				return nil
			})
			if err == nil && up.Load() && ctx.Err() != nil {
				again := "legion up"
				if o.DataDir != defaultUpDir {
					again += " --data-dir " + o.DataDir
				}
				key := ""
				if locked, err := server.StartsLocked(daemon.UpManagerDir(o.DataDir)); err == nil && locked {
					key = ", given the unlock key (autolock is on: --unlock-key-file FILE, or legion unlock)"
				}
				fmt.Fprintf(out, "Stopped: no pod is left. The cluster's objects stay in %s; %s runs them again%s.\n", o.DataDir, again, key)
			}
			return err
		},
	}
	cmd.Flags().StringVar(&o.DataDir, "data-dir", defaultUpDir, "where the cluster keeps its state")
	cmd.Flags().StringVar(&o.Listen, "listen", "127.0.0.1:7470", "address of the API")
	cmd.Flags().StringVar(&o.DNSListen, "dns-listen", "", dnsListenHelp)
	rangeFlags(cmd.Flags(), &o.PodCIDR, &o.ServiceCIDR)
	cmd.Flags().BoolVarP(&verbose, "verbose", "v", false, "log what the node does here too, not only to DATA-DIR/legion.log")
	platformFlags(cmd.Flags(), &o)
	metricsFlag(cmd.Flags(), &o)
	cmd.Flags().StringVar(&o.ExtIf, "ext-if", "", "the interface published ports arrive on (jails; default: the default route's)")
	ingressFlags(cmd, &o)
	evictionFlags(cmd, &o)
	cmd.Flags().StringVar(&unlockFile, "unlock-key-file", "", "file holding the unlock key, when the cluster's autolock is on (else legion unlock from another terminal)")
	cmd.Flags().DurationVar(&readyTimeout, "ready-timeout", 2*time.Minute, "how long to wait for the services to be ready")
	return cmd
}

// defaultUpDir is legion up's data directory unless --data-dir says.
const defaultUpDir = ".legion"

// upLogName is the file, in the data directory, legion up logs to.
const upLogName = "legion.log"

// openUpLog opens (appending) the log of legion up in its data directory.
func openUpLog(dataDir string) (string, *os.File, error) {
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return "", nil, fmt.Errorf("--data-dir %s: %w", dataDir, err)
	}
	path := filepath.Join(dataDir, upLogName)
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return "", nil, fmt.Errorf("the log of legion up: %w", err)
	}
	return path, f, nil
}

// upLogger logs everything from info up to file; the terminal gets only
// errors, the rest of what up prints being for the user, unless verbose
// asks for the whole log there too.
func upLogger(term, file io.Writer, verbose bool) *slog.Logger {
	termLevel := slog.LevelError
	if verbose {
		termLevel = slog.LevelInfo
	}
	return slog.New(slog.NewMultiHandler(
		slog.NewTextHandler(file, &slog.HandlerOptions{Level: slog.LevelInfo}),
		slog.NewTextHandler(term, &slog.HandlerOptions{Level: termLevel}),
	))
}

// composeNames are the compose files' names, in the order docker compose
// prefers them when a directory has several.
var composeNames = []string{"compose.yaml", "compose.yml", "docker-compose.yaml", "docker-compose.yml"}

func isCompose(path string) bool {
	return slices.Contains(composeNames, strings.ToLower(filepath.Base(path)))
}

// upFiles is what legion up reads of a directory's files: its image
// archives and, as docker compose up does, its compose file alone when it
// has one (the first of composeNames), else its manifests. It also
// returns the YAML and JSON files it leaves out for a compose file, to
// name them.
func upFiles(files []string) (read, left []string) {
	chosen := ""
	for _, name := range composeNames {
		for _, f := range files {
			if chosen == "" && strings.ToLower(filepath.Base(f)) == name {
				chosen = f
			}
		}
	}
	for _, f := range files {
		manifest := strings.HasSuffix(f, ".yaml") || strings.HasSuffix(f, ".yml") || strings.HasSuffix(f, ".json")
		switch {
		case strings.HasSuffix(f, ".oci.tar"), chosen == "" && manifest, f == chosen:
			read = append(read, f)
		case manifest:
			left = append(left, filepath.Base(f))
		}
	}
	return read, left
}

// deploy loads the image archives and applies the objects of path, then
// waits for the services and says where they answer.
func deploy(ctx context.Context, cmd *cobra.Command, n *daemon.Node, path string, since time.Time, readyTimeout time.Duration) error {
	out := cmd.OutOrStdout()
	info, err := os.Stat(path)
	if err != nil {
		return err
	}
	var files []string
	if info.IsDir() {
		entries, err := os.ReadDir(path)
		if err != nil {
			return err
		}
		for _, e := range entries {
			if !e.IsDir() {
				files = append(files, filepath.Join(path, e.Name()))
			}
		}
	} else {
		files = []string{path}
	}
	sort.Strings(files)
	files, left := upFiles(files)
	if len(left) > 0 {
		fmt.Fprintf(cmd.ErrOrStderr(), "note: %s holds a compose file, which is deployed alone, as docker compose up does: %s not read as manifests (legion apply -f applies them)\n",
			path, strings.Join(left, ", "))
	}
	var objs []legion.Object
	for _, f := range files {
		switch {
		case strings.HasSuffix(f, ".oci.tar"):
			fh, err := os.Open(f)
			if err != nil {
				return err
			}
			recs, err := n.Images.Load(ctx, fh, "", time.Now())
			fh.Close()
			if err != nil {
				return fmt.Errorf("loading %s: %w", f, err)
			}
			for _, r := range recs {
				fmt.Fprintf(out, "Loaded image %s.\n", r.Reference)
			}
		case isCompose(f):
			data, err := os.ReadFile(f)
			if err != nil {
				return err
			}
			stack := legion.DefaultNamespace
			res, err := compose.Convert(ctx, []compose.File{{Name: f, Content: data}}, compose.Options{
				Stack: stack, Env: environ(),
				ReadFile: func(name string) ([]byte, error) { return os.ReadFile(filepath.Join(filepath.Dir(f), name)) },
			})
			if err != nil {
				return err
			}
			printComposeWarnings(cmd.ErrOrStderr(), res.Warnings)
			objs = append(objs, res.Objects...)
		case strings.HasSuffix(f, ".yaml"), strings.HasSuffix(f, ".yml"), strings.HasSuffix(f, ".json"):
			some, err := readManifests(cmd.InOrStdin(), []string{f}, "")
			if err != nil {
				return err
			}
			objs = append(objs, some...)
		}
	}
	if len(objs) == 0 {
		fmt.Fprintln(out, "No objects to apply.")
		return nil
	}
	results, err := n.Client.Apply(ctx, objs, client.ApplyOptions{Brief: true})
	if err != nil {
		return err
	}
	for _, r := range results {
		fmt.Fprintf(out, "%s %s\n", ref(r.Object), r.Outcome)
	}
	warnApplied(cmd.ErrOrStderr(), objs, listWith(ctx, n.Client))
	return waitAndShow(ctx, out, n, objs, since, readyTimeout)
}

func environ() map[string]string {
	env := map[string]string{}
	for _, kv := range os.Environ() {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	return env
}

// waitAndShow waits for each applied service's tasks to be ready, as
// reported since since, and prints its addresses.
func waitAndShow(ctx context.Context, out io.Writer, n *daemon.Node, objs []legion.Object, since time.Time, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for _, o := range objs {
		s, ok := o.(*legion.Service)
		if !ok {
			continue
		}
		ns, name := s.Metadata.Namespace, s.Metadata.Name
		want := 1
		if s.Spec.Replicas != nil {
			want = *s.Spec.Replicas
		}
		var ready int
		var cur *legion.Service
		for {
			ready = 0
			tasks, _, err := n.Store.List(legion.KindTask, ns, func(o legion.Object) bool {
				t := o.(*legion.Task)
				return t.Spec.Owner.Kind == legion.KindService && t.Spec.Owner.Name == name &&
					t.Spec.DesiredState == legion.TaskRunning && t.Status.Ready && !t.Status.Timestamp.Before(since)
			})
			if err == nil {
				ready = len(tasks)
			}
			if g, _, err := n.Store.Get(legion.KindService, ns, name); err == nil {
				cur = g.(*legion.Service)
			}
			if (ready >= want && (cur == nil || cur.Status.VIP != "" || s.Spec.Endpoint.Mode == legion.EndpointDNSRR)) || time.Now().After(deadline) {
				break
			}
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(100 * time.Millisecond):
			}
		}
		fmt.Fprintln(out, describeService(n, s, cur, ready, want))
		if ready < want {
			if r, err := readRollout(ctx, n.Client, ns, name); err == nil {
				for _, w := range r.why() {
					fmt.Fprintf(out, "  %s\n", w)
				}
			}
			fmt.Fprintf(out, "  not all ready yet: legion get tasks -n %s --server %s --credentials %s\n", ns, n.API, n.Admin)
		}
	}
	return nil
}

// describeService says how ready a service is and where it answers: on the
// process platform its VIPs and published ports are served on this host's
// loopback; on jails pf serves them, to pods and to other hosts, not to
// this host's own traffic.
func describeService(n *daemon.Node, s, cur *legion.Service, ready, want int) string {
	var b strings.Builder
	ns, name := s.Metadata.Namespace, s.Metadata.Name
	fmt.Fprintf(&b, "service %s/%s: %d of %d tasks ready", ns, name, ready, want)
	jails := n.Platform == daemon.PlatformJails
	if cur != nil && cur.Status.VIP != "" {
		vip := cur.Status.VIP
		for _, p := range s.Spec.Endpoint.Ports {
			if jails {
				fmt.Fprintf(&b, "; VIP %s:%d (from pods)", vip, p.Port)
				continue
			}
			if n.PodNetwork == daemon.PodNetworkNetNS {
				// The VIP itself sits on the node's bridge.
				fmt.Fprintf(&b, "; VIP %s:%d (here too)", vip, p.Port)
				continue
			}
			local := vip
			if a, err := netip.ParseAddr(vip); err == nil && a.Is4() {
				local = daemon.LocalAddr(a, n.VIPOctet).String()
			}
			fmt.Fprintf(&b, "; VIP %s:%d (here %s:%d)", vip, p.Port, local, p.Port)
		}
	}
	for _, p := range s.Spec.Endpoint.Ports {
		var notServed error
		if p.Publish != "" && !jails && n.PublishError != nil {
			notServed = n.PublishError(p.PublishedPort)
		}
		switch {
		case p.Publish == "":
		case jails:
			fmt.Fprintf(&b, "; published on port %d of %s (from other hosts)", p.PublishedPort, n.ExtIf)
		case notServed != nil:
			fmt.Fprintf(&b, "; NOT published at 127.0.0.1:%d: %v", p.PublishedPort, notServed)
		default:
			fmt.Fprintf(&b, "; published at http://127.0.0.1:%d/", p.PublishedPort)
		}
	}
	host, port, _ := net.SplitHostPort(n.DNS)
	fmt.Fprintf(&b, "; DNS %s.%s.legion (dig @%s -p %s)", name, ns, host, port)
	return b.String()
}

// evictionFlag is --eviction-memory-available, kubelet's
// --eviction-hard=memory.available<... here: a byte quantity, or off.
type evictionFlag struct{ o *daemon.Options }

func (f evictionFlag) String() string {
	switch v := f.o.EvictionMemoryAvailable; {
	case v < 0:
		return "off"
	case v == 0:
		return legion.Bytes(agent.DefaultEvictionMemoryAvailable).String()
	default:
		return legion.Bytes(v).String()
	}
}

func (f evictionFlag) Set(s string) error {
	if strings.EqualFold(s, "off") {
		f.o.EvictionMemoryAvailable = agent.EvictionOff
		return nil
	}
	b, err := legion.ParseBytes(s)
	if err != nil {
		return err
	}
	if b <= 0 {
		return errors.New("expected a size above zero, or off to evict nothing")
	}
	f.o.EvictionMemoryAvailable = int64(b)
	return nil
}

func (evictionFlag) Type() string { return "bytes|off" }

// evictionFlags is the node's memory-pressure eviction threshold.
func evictionFlags(cmd *cobra.Command, o *daemon.Options) {
	cmd.Flags().Var(evictionFlag{o}, "eviction-memory-available",
		"below this much available memory the node's agent evicts tasks, those requesting no memory first (kubelet's memory.available; off: never)")
}

// ingressFlags are the flags of the node's HTTP proxy for Routes.
func ingressFlags(cmd *cobra.Command, o *daemon.Options) {
	cmd.Flags().StringVar(&o.IngressListen, "ingress-listen", "", "serve Routes over HTTP here (e.g. 0.0.0.0:80; off when empty)")
	cmd.Flags().StringVar(&o.IngressTLSListen, "ingress-tls-listen", "", "serve Routes over HTTPS here (e.g. 0.0.0.0:443; off when empty)")
	cmd.Flags().StringSliceVar(&o.IngressProxyProtocol, "ingress-proxy-protocol", nil, "CIDRs of load balancers in front of the ingress that send the PROXY protocol (v1 or v2): from them it is required and its client address used, from anyone else refused")
}
