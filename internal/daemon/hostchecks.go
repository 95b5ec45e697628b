package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"runtime"
	"strconv"
	"strings"

	"github.com/legionbsd/legion/jail"
	"github.com/legionbsd/legion/netbsd"
	"github.com/legionbsd/legion/sys"
)

// HostCheck is one thing a jails node needs of its host, as found at
// start. The checks return values rather than log lines, so that a
// command reporting on a host can show them as they are.
type HostCheck struct {
	Name  string // what is checked
	OK    bool   // the host has it (possibly after the node saw to it)
	Found string // what was seen, and what the node did about it
	Fix   string // what the operator does about it; empty when OK
	// Needed: the node must not serve without it. A check that is not
	// needed leaves the node running with less (racct: no limits).
	Needed bool
}

// HostCheckOptions is what the checks depend on.
type HostCheckOptions struct {
	ZFSRoot string // the dataset of images and container roots
	// PFMain loads netbsd.MainRuleset when the main ruleset is empty
	// (--pf-main); a main ruleset with rules of its own is never replaced.
	PFMain bool
	// DryRun changes nothing on the host (legion doctor): what the node
	// would see to itself at start is said instead, as a check that is
	// not OK and not Needed, its Fix how to make it last.
	DryRun bool
	// Linux adds what Linux images need (--linux, 6.6).
	Linux bool
}

// hostModule is a kernel module a jails node needs and what it is for.
type hostModule struct{ name, use string }

var hostModules = []hostModule{
	{"if_bridge", "the legion0 bridge"},
	{"if_epair", "the pods' interfaces"},
	{"if_wg", "the WireGuard mesh between nodes"},
	{"pf", "VIPs, published ports and network policy"},
	{"nullfs", "volumes, secrets and configs mounted into containers"},
	{"tmpfs", "the containers' memory-backed directories"},
}

// CheckHost checks a jails node's host. It does what the node may do
// itself and says so in the result: loading modules, enabling pf, creating
// the ZFS root on an existing pool, and with PFMain loading the minimal
// main ruleset. With DryRun it only looks.
func CheckHost(ctx context.Context, r sys.Runner, o HostCheckOptions) []HostCheck {
	var out []HostCheck
	pfLoaded := true
	modules := hostModules
	if o.Linux {
		modules = append(append([]hostModule(nil), hostModules...), linuxModules...)
	}
	for _, m := range modules {
		if o.DryRun {
			c := probeModule(ctx, r, m)
			pfLoaded = pfLoaded && (m.name != "pf" || c.OK)
			out = append(out, c)
			continue
		}
		_, err := sys.Run(ctx, r, "kldload", "-n", m.name)
		out = append(out, judgeModule(m, err))
	}
	res, err := sys.Run(ctx, r, "sysctl", "-n", "kern.racct.enable")
	out = append(out, judgeRacct(string(res.Stdout), err))
	if pfLoaded {
		out = append(out, checkPFEnabled(ctx, r, o.DryRun))
		out = append(out, checkPFMain(ctx, r, o.PFMain, o.DryRun))
	} else {
		// Without the module pfctl cannot say; the node loads it first.
		for _, name := range []string{pfEnabledCheck, pfMainCheck} {
			out = append(out, HostCheck{Name: name, Found: "not known: pf is not loaded yet",
				Fix: "kldload pf, then run legion doctor again"})
		}
	}
	out = append(out, checkDevfs(ctx, r, jail.DevfsRuleset))
	out = append(out, checkZFSRoot(ctx, r, o.ZFSRoot, o.DryRun))
	if o.Linux {
		res, err := sys.Run(ctx, r, "sysctl", "-n", "kern.elf64.fallback_brand")
		out = append(out, judgeFallbackBrand(string(res.Stdout), err))
	}
	return out
}

// linuxModules are jail.LinuxModules but tmpfs, which every node has.
var linuxModules = []hostModule{
	{"linux64", "the Linux ABI (--linux)"},
	{"linprocfs", "/proc in Linux containers"},
	{"linsysfs", "/sys in Linux containers"},
	{"fdescfs", "/dev/fd in Linux containers"},
}

// judgeFallbackBrand reads kern.elf64.fallback_brand, which the daemon
// sets to Linux at start only where the host left it unset (-1).
func judgeFallbackBrand(out string, err error) HostCheck {
	c := HostCheck{Name: "static Linux programs (kern.elf64.fallback_brand)"}
	switch v := strings.TrimSpace(out); {
	case err != nil:
		c.Found, c.Fix = "sysctl failed: "+errText(err), "load linux64 (kldload linux64)"
	case v == jail.FallbackBrandLinux:
		c.OK, c.Found = true, v+": unbranded programs run as Linux ones"
	case v == "-1":
		c.Found = "unset (-1): the node sets it to " + jail.FallbackBrandLinux + " (Linux) at start"
		c.Fix = "add kern.elf64.fallback_brand=" + jail.FallbackBrandLinux + " to /etc/sysctl.conf to have it at boot"
	default:
		c.Found = v + ": the host chose another brand, which the node keeps, so static Linux programs will not run (linux.static)"
		c.Fix = "sysctl kern.elf64.fallback_brand=" + jail.FallbackBrandLinux + " if nothing else on this host needs " + v
	}
	return c
}

// exitCode is a command's exit status; -1 when it did not run to exit.
func exitCode(err error) int {
	var ee *sys.ExitError
	if errors.As(err, &ee) {
		return ee.Code
	}
	return -1
}

// Names of the pf checks, which a dry run without pf reports unchecked.
const (
	pfEnabledCheck = "pf enabled"
	pfMainCheck    = `pf main ruleset calls "legion/*"`
)

// kldstatName is the name a module registers itself under, which
// `kldstat -m` looks for, where it is not its file's name: the amd64
// Linux ABI's linux64.ko declares linux64elf.
var kldstatName = map[string]string{"linux64": "linux64elf"}

// probeModule looks for a module without loading it: `kldstat -q -m`
// exits 0 when the module is in the kernel (loaded from a file or built
// in) and 1, printing nothing with -q, when not.
func probeModule(ctx context.Context, r sys.Runner, m hostModule) HostCheck {
	c := HostCheck{Name: "kernel module " + m.name}
	name := m.name
	if n, ok := kldstatName[name]; ok {
		name = n
	}
	_, err := sys.Run(ctx, r, "kldstat", "-q", "-m", name)
	switch {
	case err == nil:
		c.OK, c.Found = true, "loaded ("+m.use+")"
	case exitCode(err) == 1:
		c.Found = "not loaded: the node loads it at start (kldload -n " + m.name + ")"
		c.Fix = fmt.Sprintf("kldload %s to see that it loads; add it to kld_list in /etc/rc.conf to have it at boot (needed for %s)", m.name, m.use)
	default:
		c.Needed = true
		c.Found, c.Fix = "kldstat failed: "+errText(err), "check kldstat -m "+name+" by hand"
	}
	return c
}

// HostReady is nil when every needed check passed, otherwise an error
// naming each missing piece and its fix.
func HostReady(checks []HostCheck) error {
	var missing []string
	for _, c := range checks {
		if c.Needed && !c.OK {
			missing = append(missing, fmt.Sprintf("%s: %s; fix: %s", c.Name, c.Found, c.Fix))
		}
	}
	if len(missing) == 0 {
		return nil
	}
	return fmt.Errorf("this host cannot run a jails node:\n  %s", strings.Join(missing, "\n  "))
}

// checkJailsHost runs the checks before the node serves (before it can
// join, D7), logs each, and refuses a host missing a needed piece.
func checkJailsHost(ctx context.Context, o Options, log *slog.Logger) error {
	if o.Platform != PlatformJails || o.Runner == nil && os.Geteuid() != 0 {
		return nil // openJails refuses a jails node without root, saying so
	}
	checks := CheckHost(ctx, o.runner(), HostCheckOptions{ZFSRoot: o.ZFSRoot, PFMain: o.PFMain})
	for _, c := range checks {
		switch {
		case c.OK:
			log.Info("host check", "check", c.Name, "found", c.Found)
		case c.Needed:
			log.Error("host check failed", "check", c.Name, "found", c.Found, "fix", c.Fix)
		default:
			log.Warn("host check failed", "check", c.Name, "found", c.Found, "fix", c.Fix)
		}
	}
	return HostReady(checks)
}

func judgeModule(m hostModule, err error) HostCheck {
	c := HostCheck{Name: "kernel module " + m.name, Needed: true, OK: err == nil}
	if c.OK {
		c.Found = "loaded (" + m.use + ")"
		return c
	}
	c.Found = "kldload -n " + m.name + " failed: " + errText(err)
	c.Fix = fmt.Sprintf("install a kernel that has %s (GENERIC ships it as a module) or compile it in; it is needed for %s", m.name, m.use)
	return c
}

func judgeRacct(out string, err error) HostCheck {
	c := HostCheck{Name: "racct (kern.racct.enable)"}
	fix := "add kern.racct.enable=1 to /boot/loader.conf and reboot; until then tasks with resource limits are refused on this node"
	switch v := strings.TrimSpace(out); {
	case err == nil && v == "1":
		c.OK, c.Found = true, "enabled: resource limits are enforced"
	case sys.IsExit(err, "unknown oid"):
		c.Found, c.Fix = "the kernel has no racct", "use a kernel built with options RACCT and RCTL (GENERIC has them); until then tasks with resource limits are refused on this node"
	case err != nil:
		c.Found, c.Fix = "sysctl failed: "+errText(err), fix
	default:
		c.Found, c.Fix = "kern.racct.enable is "+strconv.Quote(v), fix
	}
	return c
}

// checkPFEnabled enables pf when it is off: `pfctl -e` prints "pf
// enabled" on standard error, or fails with "pf already enabled" when
// something enabled it meanwhile.
func checkPFEnabled(ctx context.Context, r sys.Runner, dryRun bool) HostCheck {
	c := HostCheck{Name: pfEnabledCheck, Needed: true}
	res, err := sys.Run(ctx, r, "pfctl", "-s", "info")
	if err != nil {
		c.Found, c.Fix = "pfctl -s info failed: "+errText(err), "load pf (kldload pf) and check /dev/pf exists"
		return c
	}
	on, err := netbsd.PFEnabled(string(res.Stdout))
	if err != nil {
		c.Found, c.Fix = err.Error(), "check pfctl -s info by hand"
		return c
	}
	if on {
		c.OK, c.Found = true, "enabled"
		return c
	}
	if dryRun {
		c.Needed = false
		c.Found, c.Fix = "disabled: the node enables it at start (pfctl -e)", `set pf_enable="YES" in /etc/rc.conf to have it at boot`
		return c
	}
	if _, err := sys.Run(ctx, r, "pfctl", "-e"); err != nil && !sys.IsExit(err, "pf already enabled") {
		c.Found, c.Fix = "disabled, and pfctl -e failed: "+errText(err), `run pfctl -e and set pf_enable="YES" in /etc/rc.conf`
		return c
	}
	c.OK, c.Found = true, `was disabled: the node enabled it (pfctl -e); set pf_enable="YES" in /etc/rc.conf to have it at boot`
	return c
}

func checkPFMain(ctx context.Context, r sys.Runner, load, dryRun bool) HostCheck {
	c := HostCheck{Name: pfMainCheck, Needed: true}
	nat, rules, err := showMain(ctx, r)
	if err != nil {
		c.Found, c.Fix = err.Error(), "check pfctl -s rules by hand"
		return c
	}
	missing := netbsd.MissingMainCalls(nat, rules)
	if len(missing) == 0 {
		c.OK, c.Found = true, "it does"
		return c
	}
	c.Found = "it lacks " + strings.Join(missing, ", ")
	addLines := "add " + strings.Join(missing, ", ") + " to /etc/pf.conf (nat-anchor and rdr-anchor before the filter rules) and reload it with pfctl -f /etc/pf.conf"
	if !load {
		c.Fix = addLines + ", or start the daemon with --pf-main to have it load a main ruleset of just these calls"
		return c
	}
	if strings.TrimSpace(nat) != "" || strings.TrimSpace(rules) != "" {
		c.Found += "; --pf-main loads only onto an empty main ruleset and this one has rules of its own"
		c.Fix = addLines
		return c
	}
	if dryRun {
		c.Needed = false
		c.Found += "; the main ruleset is empty: the node loads one of just these calls at start (--pf-main)"
		c.Fix = addLines + " to keep them when pf.conf is reloaded"
		return c
	}
	if _, err := r.Run(ctx, sys.Cmd{Name: "pfctl", Args: []string{"-f", "-"}, Stdin: []byte(netbsd.MainRuleset)}); err != nil {
		c.Found += "; loading the minimal main ruleset failed: " + errText(err)
		c.Fix = addLines
		return c
	}
	c.OK, c.Found = true, "the main ruleset was empty: the node loaded one of just the anchor calls (--pf-main)"
	return c
}

func showMain(ctx context.Context, r sys.Runner) (nat, rules string, err error) {
	res, err := sys.Run(ctx, r, "pfctl", "-s", "nat")
	if err != nil {
		return "", "", fmt.Errorf("pfctl -s nat failed: %s", errText(err))
	}
	nat = string(res.Stdout)
	if res, err = sys.Run(ctx, r, "pfctl", "-s", "rules"); err != nil {
		return "", "", fmt.Errorf("pfctl -s rules failed: %s", errText(err))
	}
	return nat, string(res.Stdout), nil
}

// checkDevfs checks that the ruleset container jails get hides every
// device first (itself or through the ruleset its first rule includes,
// as devfsrules_jail includes devfsrules_hide_all): without it a jail's
// /dev shows the host's devices.
func checkDevfs(ctx context.Context, r sys.Runner, ruleset int) HostCheck {
	c := HostCheck{Name: fmt.Sprintf("devfs ruleset %d (devfsrules_jail)", ruleset), Needed: true}
	fix := "load the default rulesets with service devfs restart (they come from /etc/defaults/devfs.rules; devfs_load_rulesets must not be NO in /etc/rc.conf)"
	show := func(n int) (string, error) {
		res, err := sys.Run(ctx, r, "devfs", "rule", "-s", strconv.Itoa(n), "show")
		return string(res.Stdout), err
	}
	out, err := show(ruleset)
	if err != nil {
		c.Found, c.Fix = "devfs rule show failed: "+errText(err), fix
		return c
	}
	first := firstDevfsRule(out)
	if inc, ok := devfsInclude(first); ok {
		inner, err := show(inc)
		if err != nil {
			c.Found, c.Fix = "devfs rule show failed: "+errText(err), fix
			return c
		}
		first = firstDevfsRule(inner)
	}
	switch {
	case strings.TrimSpace(out) == "":
		c.Found, c.Fix = "not loaded: containers would see all of the host's /dev", fix
	case first != "hide":
		c.Found, c.Fix = "loaded, but it does not hide every device first: containers would see too much of /dev", "restore ruleset "+strconv.Itoa(ruleset)+" from /etc/defaults/devfs.rules and "+fix
	default:
		c.OK, c.Found = true, "loaded, hiding every device first"
	}
	return c
}

// firstDevfsRule is the first rule of `devfs rule show` without its
// number ("hide", "include 1", "path zfs unhide").
func firstDevfsRule(out string) string {
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) > 1 {
			return strings.Join(f[1:], " ")
		}
	}
	return ""
}

func devfsInclude(rule string) (int, bool) {
	f := strings.Fields(rule)
	if len(f) != 2 || f[0] != "include" {
		return 0, false
	}
	n, err := strconv.Atoi(f[1])
	return n, err == nil
}

// checkZFSRoot finds the ZFS root, creating it on a pool the host has; a
// host without the pool cannot be a node (D7).
func checkZFSRoot(ctx context.Context, r sys.Runner, root string, dryRun bool) HostCheck {
	c := HostCheck{Name: "ZFS root " + root, Needed: true}
	pool, _, _ := strings.Cut(root, "/")
	if _, err := sys.Run(ctx, r, "zfs", "list", "-H", "-o", "name", root); err == nil {
		c.OK, c.Found = true, "present"
		return c
	} else if !sys.IsExit(err, "dataset does not exist") {
		c.Found, c.Fix = "zfs list failed: "+errText(err), "check zfs list "+root+" by hand"
		return c
	}
	if _, err := sys.Run(ctx, r, "zpool", "list", "-H", "-o", "name", pool); err != nil {
		c.Found = "no ZFS pool " + pool + ": " + errText(err)
		c.Fix = "every node needs a ZFS pool: create one (zpool create " + pool + " DEVICE) or give --zfs-root POOL/legion on a pool this host has"
		return c
	}
	if dryRun {
		c.Needed = false
		c.Found, c.Fix = "missing on pool "+pool+": the node creates it at start", "nothing, or zfs create -p "+root+" beforehand"
		return c
	}
	if _, err := sys.Run(ctx, r, "zfs", "create", "-p", root); err != nil {
		c.Found, c.Fix = "missing, and creating it failed: "+errText(err), "zfs create -p "+root
		return c
	}
	c.OK, c.Found = true, "was missing on pool "+pool+": the node created it"
	return c
}

// errText is a command's failure in one line.
func errText(err error) string {
	var ee *sys.ExitError
	if errors.As(err, &ee) {
		msg := strings.TrimSpace(ee.Stderr)
		if msg == "" {
			msg = strings.TrimSpace(ee.Stdout)
		}
		if msg == "" {
			return fmt.Sprintf("exit status %d", ee.Code)
		}
		return strings.Join(strings.Fields(strings.ReplaceAll(msg, "\n", "; ")), " ")
	}
	return err.Error()
}

// HostNets are the networks of this host's interfaces, loopback and
// Legion's own bridges left out: what a cluster's ranges must not overlap.
func HostNets() (map[string][]netip.Prefix, error) { return hostNets(false) }

// NetNSAvailable says, without making one, why this host cannot give
// pods network namespaces of their own, or "" when it looks able to: the
// node itself finds out for sure by making one at start.
func NetNSAvailable(ctx context.Context, r sys.Runner) string {
	if runtime.GOOS != "linux" {
		return "network namespaces are Linux's"
	}
	if os.Geteuid() != 0 {
		return fmt.Sprintf("making network namespaces needs root (running as uid %d)", os.Geteuid())
	}
	if _, err := os.Stat("/proc/self/ns/net"); err != nil {
		return "the kernel has no network namespaces: " + err.Error()
	}
	if _, err := sys.Run(ctx, r, "ip", "netns", "list"); err != nil {
		return "ip netns list failed (iproute2 is needed): " + errText(err)
	}
	return ""
}
