package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/image"
	"github.com/legionbsd/legion/internal/agent"
	"github.com/legionbsd/legion/internal/agent/attach"
	"github.com/legionbsd/legion/internal/agent/volumes"
	"github.com/legionbsd/legion/internal/endpoints"
	"github.com/legionbsd/legion/jail"
	"github.com/legionbsd/legion/jail/process"
	"github.com/legionbsd/legion/netbsd"
	"github.com/legionbsd/legion/netbsd/addrplan"
	"github.com/legionbsd/legion/netbsd/loopback"
	"github.com/legionbsd/legion/sys"
	"github.com/legionbsd/legion/zfs"
)

// What a node runs pods with (Options.Platform).
const (
	// PlatformJails: FreeBSD jails on ZFS clones of their images, each pod
	// a VNET jail on the legion0 bridge, services balanced by pf.
	PlatformJails = "jails"
	// PlatformProcess: host processes in their images' unpacked roots on
	// the loopback network. It isolates nothing; it is for development
	// and tests on any Unix.
	PlatformProcess = "process"
)

// DefaultZFSRoot is the dataset images and container roots live under on
// a jails node.
const DefaultZFSRoot = "zroot/legion"

// DefaultPlatform is the jails on FreeBSD and the process runtime
// elsewhere.
func DefaultPlatform() string {
	if runtime.GOOS == "freebsd" {
		return PlatformJails
	}
	return PlatformProcess
}

// nodeRuntime is a runtime the daemon can wait for at its end: the
// supervisors it started are reaped.
type nodeRuntime interface {
	jail.Runtime
	Wait()
}

// platform is how this node runs pods: the runtime, the image store that
// feeds it, the pod network and what turns the endpoints into load
// balancing and DNS.
type platform struct {
	kind    string
	images  *image.Images
	runtime nodeRuntime
	network agent.Network
	// leavePod takes a pod's interface off the host without the network,
	// which opens only once the node registered (jails; nil elsewhere,
	// where the next network removes what pods gone left).
	leavePod  func(ctx context.Context, taskUID string) error
	taskDirs  agent.TaskDirs // nil: private directories only
	volumes   volumes.Store  // the node's local Volumes
	attacher  *attach.Attacher
	noLimits  bool   // rctl is off: containers with limits cannot run
	zfsRoot   string // jails: the dataset the host checks found (D7)
	linux     bool   // runs Linux images (node.platform.linux)
	wgKey     string // the node's WireGuard public key (jails)
	peers     func(context.Context, []endpoints.Peer)
	endpoints func(context.Context, []*endpoints.Service, *endpoints.Policies)
	// publishError: why a published port is not served (process
	// platform, where ports are listened on; nil on jails), and
	// publishErrors every such port, for the node's status.
	publishError  func(port int) error
	publishErrors func() []legion.PortError
	// statusChanged tells the node's session that what nodeStatus says
	// changed; set before the network opens.
	statusChanged func()
	dnsListen     string // where the node resolver answers
	vipOctet      byte   // the second octet of VIPs in 127/8 (loopback network)
	close         func()
	// netns, on a process node, names its pods' namespaces when each pod
	// has its own (nil: the loopback network); dropNetwork takes the pod
	// network off the host once the pods are gone (legion up's end).
	netns       *netnsNames
	dropNetwork func(context.Context) error
	// oom is the per-container memory killer a jails node with rctl runs
	// (nil: not started, and the start-up said why).
	oom *jail.OOMKiller
	// memory measures the node's available memory for the agent's
	// node-pressure eviction (nil: this host has no way known to us).
	memory agent.MemoryReader
	// memoryPressure is what the agent last said of it, which the node
	// reports (nodeStatus).
	memoryPressure atomic.Bool
}

func (o *Options) platformDefaults() {
	if o.Platform == "" {
		o.Platform = DefaultPlatform()
	}
	if o.ZFSRoot == "" {
		o.ZFSRoot = DefaultZFSRoot
	}
}

func (o *Options) runner() sys.Runner {
	if o.Runner != nil {
		return o.Runner
	}
	return sys.Exec{}
}

// OpenImages opens the node's image store: layers as ZFS datasets under
// the ZFS root on a jails node, directories under the data directory on
// a process one.
func OpenImages(o Options, log *slog.Logger) (*image.Images, error) {
	o.platformDefaults()
	var store image.Store
	switch o.Platform {
	case PlatformJails:
		store = image.NewZFSStore(zfs.New(o.runner()), o.ZFSRoot)
	case PlatformProcess:
		ds, err := image.NewDirStore(dirStorePath(o.DataDir))
		if err != nil {
			return nil, err
		}
		store = ds
	default:
		return nil, fmt.Errorf("platform %q: expected %s or %s", o.Platform, PlatformJails, PlatformProcess)
	}
	linux, err := linuxImages(o)
	if err != nil {
		return nil, err
	}
	return image.Open(image.Options{DataDir: o.DataDir, Store: store, Log: log,
		Platform: image.PlatformRule{Arch: runtime.GOARCH, AllowLinux: linux}})
}

// dirStorePath is where a process node keeps its layers and roots.
func dirStorePath(dataDir string) string { return filepath.Join(dataDir, "layers") }

// RemoveLeftContainers removes the containers a process node on dataDir
// left (a stopped daemon leaves its pods running for the next one to
// adopt), then their roots, which on Linux as root are mounts. shim is
// the binary the containers' supervisors run. This is for whoever
// removes the node for good (tests, the lab), with RemovePodNetwork.
func RemoveLeftContainers(ctx context.Context, dataDir, shim string) error {
	rt, err := process.New(process.Config{DataDir: dataDir, Shim: shim})
	if err != nil {
		return err
	}
	cs, err := rt.List(ctx, nil)
	for _, c := range cs {
		if rerr := rt.Remove(ctx, c.ID); rerr != nil {
			err = errors.Join(err, rerr)
		}
	}
	rt.Wait()
	if _, serr := os.Stat(dirStorePath(dataDir)); serr != nil {
		return err // no image store: no roots
	}
	ds, derr := image.NewDirStore(dirStorePath(dataDir))
	if derr != nil {
		return errors.Join(err, derr)
	}
	roots, rerr := ds.Roots(ctx)
	err = errors.Join(err, rerr)
	for _, r := range roots {
		err = errors.Join(err, ds.RemoveRoot(ctx, r.ID))
	}
	return err
}

// linuxImages says whether the node runs Linux images: a jails node when
// started with --linux (through linux64); a process node when its host is
// Linux, whose programs its containers are, --linux or not. A process
// node on any other host has no Linux ABI to run them with, so --linux
// is refused there rather than accepted and not done.
func linuxImages(o Options) (bool, error) {
	switch {
	case o.Platform == PlatformJails:
		return o.Linux, nil
	case runtime.GOOS == "linux":
		return true, nil
	case o.Linux:
		return false, fmt.Errorf("--linux: the %s platform runs images as host processes, and this %s host has no Linux ABI for them; use --platform %s on FreeBSD", o.Platform, runtime.GOOS, PlatformJails)
	}
	return false, nil
}

// openPlatform opens the node's image store and runtime, and says at start
// which they are; openNetwork adds the pod network once the node's subnet
// is known.
func openPlatform(ctx context.Context, o Options, exe string, log *slog.Logger) (*platform, error) {
	images, err := OpenImages(o, log)
	if err != nil {
		return nil, err
	}
	p := &platform{kind: o.Platform, images: images, close: func() { images.Close() }}
	if o.Platform == PlatformJails {
		p.zfsRoot = o.ZFSRoot // checkJailsHost found or made it before this
	}
	p.linux, _ = linuxImages(o) // OpenImages refused what it refuses
	if o.Linux && o.Platform == PlatformProcess {
		log.Info("--linux: this process node runs Linux images as the host's own processes, with or without it (node.platform.linux true)")
	}
	// Volumes of other drivers: every one on jails, plugins only on the
	// process platform (the attacher says so to a task that asks).
	p.attacher = &attach.Attacher{Runner: o.runner(), RunDir: o.RunDir, PluginDir: o.VolumePlugins, Platform: attach.PlatformProcess, Logger: log}
	switch o.Platform {
	case PlatformProcess:
		p.runtime, err = process.New(process.Config{DataDir: o.DataDir, Shim: exe, Log: log})
		p.volumes = volumes.NewDir(o.DataDir)
		if err == nil {
			err = p.choosePodNetwork(ctx, o, log)
		}
	case PlatformJails:
		if o.PodNetwork != "" {
			// Jails have their own network (VNET on legion0): refuse
			// rather than ignore a setting that cannot apply.
			images.Close()
			return nil, fmt.Errorf("pod network %q: only the process platform has a choice of pod network; jails are always VNET jails on legion0", o.PodNetwork)
		}
		p.runtime, p.oom, p.noLimits, err = openJails(ctx, o, exe, log)
		p.taskDirs = agent.TmpfsDirs{Runner: o.runner()}
		p.leavePod = netbsd.Host{R: o.runner(), Log: log}.LeavePod
		p.volumes = volumes.NewZFS(o.runner(), o.ZFSRoot)
		p.attacher.Platform = attach.PlatformJails
	}
	if err != nil {
		images.Close()
		return nil, err
	}
	p.memory = nodeMemory(o)
	return p, nil
}

// nodeMemory is how the agent measures the node's available memory: with
// sysctl(8) on FreeBSD (jails, or processes there), from /proc/meminfo on
// Linux; nil on any other host.
func nodeMemory(o Options) agent.MemoryReader {
	switch {
	case o.Platform == PlatformJails || runtime.GOOS == "freebsd":
		return agent.SysctlMemory{Runner: o.runner()}
	case runtime.GOOS == "linux":
		return agent.MemInfo{}
	}
	return nil
}

// choosePodNetwork decides a process node's pod network: a namespace per
// pod when asked for and possible, the loopback network otherwise, and
// says which and why.
func (p *platform) choosePodNetwork(ctx context.Context, o Options, log *slog.Logger) error {
	switch o.PodNetwork {
	case "", PodNetworkLoopback:
		log.Warn("platform process: containers are host processes and pods share the host's network (pod network loopback); nothing is isolated")
		return nil
	case PodNetworkNetNS, PodNetworkAuto:
	default:
		return fmt.Errorf("pod network %q: expected %s, %s or %s", o.PodNetwork, PodNetworkAuto, PodNetworkNetNS, PodNetworkLoopback)
	}
	names := netnsNames{netnsTag(o.DataDir)}
	if why := netnsUsable(ctx, o.runner(), names); why != "" {
		if o.PodNetwork == PodNetworkNetNS {
			return fmt.Errorf("pod network %s: %s; use --pod-network %s", PodNetworkNetNS, why, PodNetworkLoopback)
		}
		log.Warn("platform process: containers are host processes and pods share the host's network (pod network loopback); nothing is isolated",
			"why_not_netns", why)
		return nil
	}
	log.Warn("platform process: containers are host processes, each pod in a network namespace of its own (pod network netns); nothing else is isolated")
	p.netns = &names
	p.runtime = netnsRuntime{nodeRuntime: p.runtime, names: names}
	return nil
}

func openJails(ctx context.Context, o Options, exe string, log *slog.Logger) (*jail.Jails, *jail.OOMKiller, bool, error) {
	r := o.runner()
	if o.Runner == nil && os.Geteuid() != 0 {
		// jail(8), ifconfig, pfctl and zfs all need it; say so before the
		// first of them fails on its own terms.
		return nil, nil, false, fmt.Errorf("platform %s runs jails, ZFS and pf and needs root (running as uid %d); use --platform %s for a development node", PlatformJails, os.Geteuid(), PlatformProcess)
	}
	host, warnings, err := jail.Startup(ctx, r, o.Linux)
	if err != nil {
		return nil, nil, false, fmt.Errorf("jail runtime: %w", err)
	}
	for _, w := range warnings {
		log.Warn(w)
	}
	log.Info("platform jails: pods are VNET jails on ZFS clones of their images", "zfs_root", o.ZFSRoot, "linux", o.Linux)
	cfg := jail.Config{DataDir: o.DataDir, Runner: r, Shim: exe, Launch: o.launch, NoLimits: host.NoLimits,
		Spawner: jail.ExecSpawner{}, Log: log}
	vm, haveVM := jail.VMSource(nil), false
	if o.kernelVM != nil {
		vm, haveVM = o.kernelVM, true
	} else if hv, ok := jail.HostVM(r); ok {
		vm, haveVM = hv, true
	}
	if haveVM {
		// Usage, metrics and the autoscaler see the count the killer acts on.
		cfg.Memory = jail.VMCounter{Source: vm}
	}
	rt, err := jail.NewJails(cfg)
	if err != nil {
		return nil, nil, false, err
	}
	var oom *jail.OOMKiller
	switch {
	case host.NoLimits:
		log.Warn("memory killer not started: rctl is off (kern.racct.enable is not 1), so this node runs no container with a memory limit")
	case !haveVM:
		log.Warn("memory killer not started: this host has no kernel memory records to count containers by; rctl's per-process memoryuse rule is the only memory limit")
	default:
		oom = rt.OOMKiller(vm)
	}
	// Jails an earlier daemon left running are checked against their
	// profiles (tightened where looser) and get their rctl rules back;
	// the agent then adopts their pods by label.
	if err := rt.Adopt(ctx); err != nil {
		log.Warn("checking the jails left running", "err", err)
	}
	return rt, oom, host.NoLimits, nil
}

// networkConfig is what a node's pod network is made from.
type networkConfig struct {
	plan   addrplan.Plan // the cluster's ranges
	subnet int           // the node's pod subnet, the plan's <subnet>-th /24
	node   string        // the node's name
	zone   string        // the resolver's zone file
	keyDir string        // where the node's WireGuard key lives
}

// openNetwork gives the platform its pod network: the loopback one with a
// proxy per VIP port for processes, legion0 and pf for jails.
func (p *platform) openNetwork(ctx context.Context, o Options, nc networkConfig, log *slog.Logger) error {
	if p.netns != nil {
		return p.openNetNSNetwork(ctx, o, nc, log)
	}
	if p.kind == PlatformProcess {
		// The cluster's ranges mapped into 127/8: pod 10.X.n.h is 127.X.n.h.
		sub := loopback.Image(nc.plan.NodeSubnet(nc.subnet))
		log.Info("pod network: loopback", "subnet", sub, "vips", loopback.Image(nc.plan.Service))
		eps := &Endpoints{ZoneFile: nc.zone, Logger: log, VIPOctet: nc.plan.ServiceOctet(), Changed: p.statusChanged}
		p.network = &LoopbackNetwork{Subnet: sub}
		p.endpoints, p.publishError, p.publishErrors = eps.Apply, eps.PublishError, eps.PublishErrors
		p.vipOctet = nc.plan.ServiceOctet()
		p.dnsListen = resolverAddr(sub.Addr().Next())
		images := p.images
		p.close = func() { eps.Close(); images.Close() }
		return nil
	}
	r := o.runner()
	extIf := o.ExtIf
	if extIf == "" {
		var err error
		if extIf, err = defaultInterface(ctx, r); err != nil {
			log.Warn("no external interface found: published ports are not redirected", "err", err)
		}
	}
	if err := os.MkdirAll(nc.keyDir, 0o700); err != nil {
		return err
	}
	nw, err := NewPFNetwork(ctx, PFNetworkConfig{Host: netbsd.Host{R: r, Log: log},
		Node: netbsd.Node{Name: nc.node, Subnet: nc.subnet}, Plan: nc.plan,
		KeyPath: filepath.Join(nc.keyDir, "wireguard.key"), ExtIf: extIf, ZoneFile: nc.zone, Logger: log})
	if err != nil {
		return err
	}
	log.Info("pod network: legion0 and pf", "subnet", nc.plan.NodeSubnet(nc.subnet), "vips", nc.plan.OrDefault().Service, "ext_if", extIf)
	p.network = nw
	p.endpoints = nw.Apply
	p.peers = nw.ApplyPeers
	p.dnsListen = netip.AddrPortFrom(nc.plan.Gateway(nc.subnet), 53).String()
	return nil
}

// openNetNSNetwork gives a process node's pods namespaces of their own on
// its bridge, after removing what an earlier daemon left of pods that are
// gone; the resolver answers on the gateway.
func (p *platform) openNetNSNetwork(ctx context.Context, o Options, nc networkConfig, log *slog.Logger) error {
	keep := map[string]bool{}
	cs, err := p.runtime.List(ctx, map[string]string{agent.LabelNode: nc.node})
	if err != nil {
		return fmt.Errorf("pod network: listing the pods left running: %w", err)
	}
	for _, c := range cs {
		if c.Infra {
			keep[c.ID] = true
		}
	}
	subnet, gw := nc.plan.NodeSubnet(nc.subnet), nc.plan.Gateway(nc.subnet)
	eps := &Endpoints{ZoneFile: nc.zone, Logger: log, Local: func(a netip.Addr) netip.Addr { return a }, Changed: p.statusChanged}
	nw, err := NewNetNSNetwork(ctx, o.runner(), p.netns.tag, subnet, gw, eps, keep, log)
	if err != nil {
		return err
	}
	log.Info("pod network: netns, a namespace per pod on the node's bridge", "bridge", p.netns.bridge(), "subnet", subnet, "gateway", gw)
	p.network = nw
	p.endpoints, p.publishError, p.publishErrors = nw.Apply, eps.PublishError, eps.PublishErrors
	p.dropNetwork = nw.Remove
	p.dnsListen = netip.AddrPortFrom(gw, 53).String()
	images := p.images
	p.close = func() { eps.Close(); images.Close() }
	return nil
}

// wireGuardKey makes the node's WireGuard key on first start (jails) and
// keeps its public half for the node's status, which the other nodes'
// meshes are made from.
func (p *platform) wireGuardKey(ctx context.Context, o Options, keyDir string) error {
	if p.kind != PlatformJails {
		return nil
	}
	if err := os.MkdirAll(keyDir, 0o700); err != nil {
		return err
	}
	pub, err := netbsd.EnsureKey(ctx, o.runner(), filepath.Join(keyDir, "wireguard.key"))
	if err != nil {
		return err
	}
	p.wgKey = pub
	return nil
}

// subnetOf is n of a node's pod subnet, the n-th /24 of plan's pod range.
func subnetOf(plan addrplan.Plan, podCIDR string) (int, error) {
	pods := plan.OrDefault().Pod
	p, err := netip.ParsePrefix(podCIDR)
	if err != nil || !pods.Contains(p.Addr()) || p.Bits() != 24 {
		return 0, fmt.Errorf("pod subnet %q: expected a /24 of %s", podCIDR, pods)
	}
	return int(p.Addr().As4()[2]), nil
}

// defaultInterface is the interface of the default route, where published
// ports arrive (`route -n get default` prints "interface: em0").
func defaultInterface(ctx context.Context, r sys.Runner) (string, error) {
	res, err := sys.Run(ctx, r, "route", "-n", "get", "default")
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(string(res.Stdout), "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok && k == "interface" {
			return strings.TrimSpace(v), nil
		}
	}
	return "", fmt.Errorf("route -n get default printed no interface")
}
