package main

import (
	"context"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/legionbsd/legion/internal/daemon"
	"github.com/legionbsd/legion/netbsd/addrplan"
	"github.com/legionbsd/legion/sys"
)

// A check's outcome: ok, warn (the node runs, with less or after seeing
// to it itself) or fail (the node will not run, or not as asked).
const (
	doctorOK   = "ok"
	doctorWarn = "warn"
	doctorFail = "fail"
)

// Clock skew against the managers: certificates are issued valid from a
// minute before the manager's now (pki), so a host further behind than
// that refuses them; events and logs from hosts a few seconds apart
// already read out of order.
const (
	clockSkewWarn = 2 * time.Second
	clockSkewFail = 50 * time.Second
)

// minFreeBSD is the oldest FreeBSD major release Legion is built for.
const minFreeBSD = 15

// doctorCheck is one line of legion doctor.
type doctorCheck struct {
	Check  string `json:"check"`
	Status string `json:"status"`
	Found  string `json:"found"`
	Fix    string `json:"fix,omitempty"`
}

// doctorOptions are what legion doctor checks the host for, as the
// daemon's flags would be given.
type doctorOptions struct {
	Platform             string
	ZFSRoot              string
	Linux, PFMain        bool
	PodCIDR, ServiceCIDR string
}

// doctorHost is what doctor reads of the host other than through the
// commands it runs; tests give their own.
type doctorHost struct {
	OS    string
	EUID  int
	Nets  func() (map[string][]netip.Prefix, error)
	NetNS func(context.Context, sys.Runner) string // "" when pods can have namespaces
	// Clock asks a manager for its time; nil when no manager was given.
	Clock func(context.Context) (managerClock, error)
}

// managerClock is a manager's answer with the local times around it.
type managerClock struct {
	Addr       string
	Sent, Got  time.Time // this host's clock around the call
	ManagerNow time.Time // zero: the manager is too old to say
}

// runDoctor checks the host and never changes it.
func runDoctor(ctx context.Context, r sys.Runner, h doctorHost, o doctorOptions) []doctorCheck {
	var out []doctorCheck
	jails := o.Platform == daemon.PlatformJails
	if jails {
		out = append(out, checkFreeBSDVersion(ctx, r, h.OS))
		if h.OS != "freebsd" {
			return out // FreeBSD's tools are not here to ask
		}
		root := doctorCheck{Check: "running as root", Status: doctorOK, Found: "yes"}
		if h.EUID != 0 {
			root = doctorCheck{Check: "running as root", Status: doctorFail, Found: fmt.Sprintf("no (uid %d): this check sees less, and a jails node does not start",
				h.EUID), Fix: "run legion doctor and legion daemon as root"}
		}
		out = append(out, root)
		for _, c := range daemon.CheckHost(ctx, r, daemon.HostCheckOptions{ZFSRoot: o.ZFSRoot, PFMain: o.PFMain, Linux: o.Linux, DryRun: true}) {
			out = append(out, fromHostCheck(c))
		}
		out = append(out, checkForwarding(ctx, r))
	} else {
		out = append(out, processPlatform(ctx, r, h)...)
	}
	out = append(out, checkRanges(h, o))
	if h.Clock != nil {
		out = append(out, checkClock(ctx, h.Clock))
	}
	return out
}

func fromHostCheck(c daemon.HostCheck) doctorCheck {
	d := doctorCheck{Check: c.Name, Found: c.Found, Fix: c.Fix, Status: doctorOK}
	switch {
	case c.OK:
	case c.Needed:
		d.Status = doctorFail
	default:
		d.Status = doctorWarn
	}
	return d
}

// checkFreeBSDVersion reads the running kernel's and the userland's
// releases (freebsd-version -ru prints them in that order, a line each).
func checkFreeBSDVersion(ctx context.Context, r sys.Runner, goos string) doctorCheck {
	c := doctorCheck{Check: "FreeBSD version"}
	if goos != "freebsd" {
		c.Status, c.Found, c.Fix = doctorFail, "this host runs "+goos, "jails nodes run on FreeBSD "+strconv.Itoa(minFreeBSD)+"; use --platform process here"
		return c
	}
	res, err := sys.Run(ctx, r, "freebsd-version", "-ru")
	if err != nil {
		c.Status, c.Found, c.Fix = doctorFail, "freebsd-version failed: "+err.Error(), "check freebsd-version -ru by hand"
		return c
	}
	lines := strings.Fields(string(res.Stdout))
	if len(lines) != 2 {
		c.Status, c.Found, c.Fix = doctorFail, fmt.Sprintf("freebsd-version -ru printed %q, expected the kernel's and the userland's release", res.Stdout), "check freebsd-version -ru by hand"
		return c
	}
	kernel, user := lines[0], lines[1]
	c.Found = "kernel " + kernel + ", userland " + user
	km, uk := releaseMajor(kernel), releaseMajor(user)
	switch {
	case km < minFreeBSD:
		c.Status, c.Fix = doctorFail, fmt.Sprintf("upgrade to FreeBSD %d (freebsd-update upgrade -r %d.0-RELEASE); Legion uses its pf, jail and netlink behaviour", minFreeBSD, minFreeBSD)
	case uk != km:
		c.Status, c.Fix = doctorWarn, "finish the upgrade: the userland's major release differs from the kernel's (freebsd-update install)"
	default:
		c.Status = doctorOK
	}
	return c
}

// releaseMajor is 15 of "15.0-RELEASE-p2"; 0 when unreadable.
func releaseMajor(rel string) int {
	major, _, _ := strings.Cut(rel, ".")
	n, _ := strconv.Atoi(major)
	return n
}

// checkForwarding reads both families' forwarding, which the node turns
// on at every start (netbsd.SetUpNode).
func checkForwarding(ctx context.Context, r sys.Runner) doctorCheck {
	c := doctorCheck{Check: "IP forwarding", Status: doctorOK}
	var off []string
	for _, name := range []string{"net.inet.ip.forwarding", "net.inet6.ip6.forwarding"} {
		res, err := sys.Run(ctx, r, "sysctl", "-n", name)
		if err != nil {
			c.Status, c.Found, c.Fix = doctorFail, "sysctl "+name+" failed: "+err.Error(), "check sysctl "+name+" by hand"
			return c
		}
		if strings.TrimSpace(string(res.Stdout)) != "1" {
			off = append(off, name)
		}
	}
	if len(off) == 0 {
		c.Found = "on for IPv4 and IPv6"
		return c
	}
	c.Status = doctorWarn
	c.Found = strings.Join(off, " and ") + " off: the node turns forwarding on at start"
	c.Fix = `set gateway_enable="YES" and ipv6_gateway_enable="YES" in /etc/rc.conf to keep it on across reboots`
	return c
}

// checkRanges checks the cluster's ranges against this host's networks.
// On the process platform init picks free ones itself unless told.
func checkRanges(h doctorHost, o doctorOptions) doctorCheck {
	c := doctorCheck{Check: "address ranges"}
	plan := addrplan.Plan{}
	for _, f := range []struct {
		flag, value string
		into        *netip.Prefix
	}{{"--pod-cidr", o.PodCIDR, &plan.Pod}, {"--service-cidr", o.ServiceCIDR, &plan.Service}} {
		if f.value == "" {
			continue
		}
		p, err := addrplan.ParseRange(f.flag, f.value)
		if err != nil {
			c.Status, c.Found, c.Fix = doctorFail, err.Error(), "give an IPv4 /16 to "+f.flag
			return c
		}
		*f.into = p
	}
	if o.Platform == daemon.PlatformProcess && (!plan.Pod.IsValid() || !plan.Service.IsValid()) {
		c.Status, c.Found = doctorOK, "chosen at legion init among the ranges no network or cluster of this host uses"
		return c
	}
	def := addrplan.Default()
	if !plan.Pod.IsValid() {
		plan.Pod = def.Pod
	}
	if !plan.Service.IsValid() {
		plan.Service = def.Service
	}
	if err := plan.Validate(); err != nil {
		c.Status, c.Found, c.Fix = doctorFail, err.Error(), "give --pod-cidr and --service-cidr that do not overlap"
		return c
	}
	nets, err := h.Nets()
	if err != nil {
		c.Status, c.Found, c.Fix = doctorFail, "listing this host's networks: "+err.Error(), "check the interfaces' addresses by hand"
		return c
	}
	if err := plan.CheckRanges(map[string][]netip.Prefix{"this host": nets["this host"]}); err != nil {
		c.Status, c.Found = doctorFail, err.Error()
		c.Fix = "give legion init other ranges (--pod-cidr, --service-cidr), or renumber the host's network"
		return c
	}
	c.Status, c.Found = doctorOK, fmt.Sprintf("pods %s and services %s overlap none of this host's networks", plan.Pod, plan.Service)
	return c
}

// checkClock compares this host's clock with a manager's, the manager's
// answer taken to be from halfway through the call.
func checkClock(ctx context.Context, ask func(context.Context) (managerClock, error)) doctorCheck {
	c := doctorCheck{Check: "clock skew"}
	m, err := ask(ctx)
	if err != nil {
		c.Status, c.Found, c.Fix = doctorWarn, "not checked: "+err.Error(), "a manager answers only clients of its cluster: run doctor with a context holding credentials, or LEGION_CREDENTIALS, and --manager ADDR"
		return c
	}
	if m.ManagerNow.IsZero() {
		c.Status, c.Found, c.Fix = doctorWarn, "not checked: the manager at "+m.Addr+" is too old to say its time", "upgrade the managers"
		return c
	}
	rtt := m.Got.Sub(m.Sent)
	skew := m.ManagerNow.Sub(m.Sent.Add(rtt / 2))
	abs := skew.Abs()
	within := (rtt / 2).Round(time.Millisecond)
	c.Found = fmt.Sprintf("this host is %s %s the manager at %s (±%s)", abs.Round(time.Millisecond), aheadOrBehind(skew), m.Addr, within)
	if abs < time.Millisecond {
		c.Found = fmt.Sprintf("this host's clock matches the manager's at %s (±%s)", m.Addr, within)
	}
	switch {
	case abs > clockSkewFail:
		c.Status = doctorFail
		c.Fix = fmt.Sprintf("synchronise the clocks (ntpd or chronyd on every node): beyond %s the managers' certificates look not yet valid here", clockSkewFail)
	case abs > clockSkewWarn:
		c.Status = doctorWarn
		c.Fix = fmt.Sprintf("synchronise the clocks (ntpd or chronyd): above %s events and logs of different nodes read out of order", clockSkewWarn)
	default:
		c.Status = doctorOK
	}
	return c
}

func aheadOrBehind(skew time.Duration) string {
	if skew > 0 {
		return "behind" // the manager's clock reads later than ours
	}
	return "ahead of"
}

// processPlatform says what the process platform isolates on this host
// and what it does not.
func processPlatform(ctx context.Context, r sys.Runner, h doctorHost) []doctorCheck {
	out := []doctorCheck{{Check: "platform", Status: doctorOK,
		Found: "process on " + h.OS + ": containers are processes of this host under a supervisor each, in their image's unpacked root"}}
	root := doctorCheck{Check: "running as root", Status: doctorOK, Found: "yes: containers are chrooted into their root and run as their image's user"}
	if h.EUID != 0 {
		root = doctorCheck{Check: "running as root", Status: doctorWarn,
			Found: fmt.Sprintf("no (uid %d): containers run as this user, not chrooted (their root is only their working directory), and pods get no network namespaces", h.EUID),
			Fix:   "run the daemon as root for chrooted containers and, on Linux, a network namespace per pod"}
	}
	out = append(out, root)
	pod := doctorCheck{Check: "pod network"}
	if why := h.NetNS(ctx, r); why == "" {
		pod.Status, pod.Found = doctorOK, "netns available: each pod gets a network namespace of its own (--pod-network auto picks it)"
	} else {
		pod.Status, pod.Found = doctorWarn, "loopback only ("+why+"): pods share this host's network stack, each on an address of 127/8, and see each other's ports"
		pod.Fix = "run the daemon as root on Linux with iproute2 for a namespace per pod"
	}
	out = append(out,
		pod,
		doctorCheck{Check: "resource limits", Status: doctorWarn, Found: "not enforced: requests place tasks, limits are not applied to the processes",
			Fix: "run workloads that need limits on FreeBSD jails nodes (rctl)"},
		doctorCheck{Check: "storage", Status: doctorWarn, Found: "no ZFS: images and volumes are plain directories: no clones, volume sizes not enforced, and a volume's backup is its files copied one by one while its tasks run, not a snapshot",
			Fix: "use FreeBSD jails nodes with a ZFS pool where that matters"},
		doctorCheck{Check: "network policy", Status: doctorWarn, Found: "not enforced: there is no pf here, so pods reach each other whatever NetworkPolicy says",
			Fix: "use FreeBSD jails nodes (pf) for workloads that need policy"},
		doctorCheck{Check: "process isolation", Status: doctorWarn, Found: "none: containers see the host's processes and users (no jail, no PID or user namespace)",
			Fix: "use the process platform for development and tests; FreeBSD jails nodes isolate containers"},
	)
	return out
}

// doctorFailed is non-nil when any check failed.
func doctorFailed(checks []doctorCheck) error {
	var failed []string
	for _, c := range checks {
		if c.Status == doctorFail {
			failed = append(failed, c.Check)
		}
	}
	if len(failed) == 0 {
		return nil
	}
	return fmt.Errorf("this host is not ready: %s failed", strings.Join(failed, ", "))
}
