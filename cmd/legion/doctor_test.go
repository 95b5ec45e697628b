package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/legionbsd/legion/internal/daemon"
	"github.com/legionbsd/legion/internal/golden"
	"github.com/legionbsd/legion/internal/testcluster"
	"github.com/legionbsd/legion/sys"
)

// readyFreeBSD scripts a FreeBSD 15 host with everything a jails node
// needs, in the tools' own words; rules added before it win. Modules
// not scripted are there: the Fake's default answer is success.
func readyFreeBSD(f *sys.Fake) *sys.Fake {
	return f.On("freebsd-version -ru", sys.FreeBSDVersion("15.0-RELEASE-p1", "15.0-RELEASE-p2")).
		On("sysctl -n kern.racct.enable", sys.Answer{Stdout: "1\n"}).
		On("pfctl -s info", sys.PfInfo(true)).
		On("pfctl -s nat", sys.Answer{Stdout: "nat-anchor \"legion/*\" all\nrdr-anchor \"legion/*\" all\n"}).
		On("pfctl -s rules", sys.Answer{Stdout: "anchor \"legion/*\" all\npass all flags S/SA keep state\n"}).
		On("devfs rule -s 4 show", sys.Answer{Stdout: "100 include 1\n200 include 2\n300 include 3\n"}).
		On("devfs rule -s 1 show", sys.Answer{Stdout: "100 hide\n"}).
		On("zfs list -H -o name zroot/legion", sys.Answer{Stdout: "zroot/legion\n"}).
		On("sysctl -n net.inet.ip.forwarding", sys.Answer{Stdout: "1\n"}).
		On("sysctl -n net.inet6.ip6.forwarding", sys.Answer{Stdout: "1\n"}).
		On("sysctl -n kern.elf64.fallback_brand", sys.Answer{Stdout: "3\n"})
}

// labHost is a host on 192.168.1.0/24 and 10.42.7.0/24 whose manager's
// clock is skew ahead of its own.
func labHost(euid int, skew time.Duration) doctorHost {
	sent := time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)
	return doctorHost{OS: "freebsd", EUID: euid,
		Nets: func() (map[string][]netip.Prefix, error) {
			return map[string][]netip.Prefix{"this host": {netip.MustParsePrefix("192.168.1.0/24"), netip.MustParsePrefix("10.42.7.0/24")}}, nil
		},
		NetNS: func(context.Context, sys.Runner) string { return "network namespaces are Linux's" },
		Clock: func(context.Context) (managerClock, error) {
			return managerClock{Addr: "192.168.1.10:7470", Sent: sent, Got: sent.Add(4 * time.Millisecond), ManagerNow: sent.Add(2*time.Millisecond + skew)}, nil
		}}
}

// changes are the commands that would alter a host; doctor runs none.
var changes = []string{"kldload", "pfctl -e", "pfctl -f", "zfs create", "sysctl kern.", "sysctl net."}

// legion doctor on a ready FreeBSD host, on a broken one (each failing
// check naming its fix), and on one the node would finish setting up
// itself (warnings only): table and JSON, the commands run, and the exit.
func TestDoctorGolden(t *testing.T) {
	t.Parallel()
	noDataset := sys.Answer{Code: 1, Stderr: "cannot open 'zroot/legion': dataset does not exist\n"}
	cases := []struct {
		name   string
		host   doctorHost
		opts   doctorOptions
		script func(f *sys.Fake)
		failed []string // the checks that fail; nil: the host is ready
	}{
		{name: "ready FreeBSD host (--linux)", host: labHost(0, 300*time.Millisecond), opts: doctorOptions{Linux: true}},
		{name: "the node sees to the rest at start (--pf-main)", host: labHost(0, -3*time.Second), opts: doctorOptions{PFMain: true},
			script: func(f *sys.Fake) {
				f.On("kldstat -q -m if_bridge", sys.KldstatNoModule()).On("kldstat -q -m if_epair", sys.KldstatNoModule()).
					On("pfctl -s info", sys.PfInfo(false)).On("pfctl -s nat", sys.Answer{}).On("pfctl -s rules", sys.Answer{}).
					On("zfs list -H -o name zroot/legion", noDataset).On("zpool list -H -o name zroot", sys.Answer{Stdout: "zroot\n"}).
					On("sysctl -n net.inet.ip.forwarding", sys.Answer{Stdout: "0\n"}).
					On("sysctl -n net.inet6.ip6.forwarding", sys.Answer{Stdout: "0\n"})
			}},
		{name: "broken FreeBSD host (--linux, --pod-cidr 10.42.0.0/16)", host: labHost(1001, -90*time.Second),
			opts: doctorOptions{Linux: true, PodCIDR: "10.42.0.0/16"},
			script: func(f *sys.Fake) {
				f.On("freebsd-version -ru", sys.FreeBSDVersion("14.3-RELEASE", "14.3-RELEASE")).
					On("kldstat -q -m if_wg", sys.KldstatNoModule()).On("kldstat -q -m pf", sys.KldstatNoModule()).
					On("kldstat -q -m linux64elf", sys.KldstatNoModule()).
					On("sysctl -n kern.racct.enable", sys.Answer{Stdout: "0\n"}).
					On("devfs rule -s 4 show", sys.Answer{}).
					On("zfs list -H -o name zroot/legion", noDataset).
					On("zpool list -H -o name zroot", sys.Answer{Code: 1, Stderr: "cannot open 'zroot': no such pool\n"}).
					On("sysctl -n kern.elf64.fallback_brand", sys.Answer{Stdout: "9\n"})
			},
			failed: []string{"FreeBSD version", "running as root", "devfs ruleset 4 (devfsrules_jail)", "ZFS root zroot/legion", "address ranges", "clock skew"}},
	}
	var b strings.Builder
	for _, c := range cases {
		f := sys.NewFake()
		if c.script != nil {
			c.script(f)
		}
		readyFreeBSD(f)
		c.opts.Platform, c.opts.ZFSRoot = daemon.PlatformJails, daemon.DefaultZFSRoot
		checks := runDoctor(context.Background(), f, c.host, c.opts)
		var failed []string
		for _, ch := range checks {
			if ch.Status != doctorOK && ch.Fix == "" {
				t.Errorf("%s: %s is %s naming no fix", c.name, ch.Check, ch.Status)
			}
			if ch.Status == doctorFail {
				failed = append(failed, ch.Check)
			}
		}
		if fmt.Sprint(failed) != fmt.Sprint(c.failed) {
			t.Errorf("%s: failed checks %q, want %q", c.name, failed, c.failed)
		}
		if err := doctorFailed(checks); (err != nil) != (len(c.failed) > 0) {
			t.Errorf("%s: exit error %v with failed checks %q", c.name, err, failed)
		}
		for _, line := range f.Lines() {
			for _, ch := range changes {
				if strings.HasPrefix(line, ch) {
					t.Errorf("%s: doctor changed the host: %s", c.name, line)
				}
			}
		}
		fmt.Fprintf(&b, "== %s\n", c.name)
		for _, line := range f.Lines() {
			fmt.Fprintf(&b, "$ %s\n", line)
		}
		if err := printDoctor(&b, checks, false); err != nil {
			t.Fatal(err)
		}
		b.WriteString("\n")
	}
	golden.Check(t, filepath.Join("testdata", "doctor.golden"), b.String())

	// --json carries the same checks, for tools.
	f := readyFreeBSD(sys.NewFake())
	checks := runDoctor(context.Background(), f, labHost(0, 0), doctorOptions{Platform: daemon.PlatformJails, ZFSRoot: daemon.DefaultZFSRoot})
	var out bytes.Buffer
	if err := printDoctor(&out, checks, true); err != nil {
		t.Fatal(err)
	}
	var back []doctorCheck
	if err := json.Unmarshal(out.Bytes(), &back); err != nil || len(back) != len(checks) || back[0] != checks[0] {
		t.Fatalf("doctor's JSON %s does not read back as its checks (%v)", out.String(), err)
	}
}

// Asked about jails on a host that is not FreeBSD, doctor fails the one
// check that matters and runs none of FreeBSD's tools.
func TestDoctorJailsOffFreeBSD(t *testing.T) {
	t.Parallel()
	f := sys.NewFake()
	h := labHost(0, 0)
	h.OS = "linux"
	checks := runDoctor(context.Background(), f, h, doctorOptions{Platform: daemon.PlatformJails, ZFSRoot: daemon.DefaultZFSRoot})
	if len(checks) != 1 || checks[0].Status != doctorFail || !strings.Contains(checks[0].Fix, "--platform process") || len(f.Lines()) != 0 {
		t.Fatalf("checks %+v, commands %q", checks, f.Lines())
	}
}

// The skew is measured against the middle of the call, either way, and
// judged by clockSkewWarn and clockSkewFail.
func TestDoctorClockSkew(t *testing.T) {
	t.Parallel()
	sent := time.Unix(1_800_000_000, 0)
	for _, c := range []struct {
		skew   time.Duration // the manager's clock ahead of this host's
		status string
		found  string
	}{
		{0, doctorOK, "this host's clock matches the manager's"},
		{1500 * time.Millisecond, doctorOK, "1.5s behind"},
		{-2500 * time.Millisecond, doctorWarn, "2.5s ahead of"},
		{51 * time.Second, doctorFail, "51s behind"},
		{-61 * time.Second, doctorFail, "1m1s ahead of"},
	} {
		// The call took 2s: the manager answered, by its clock, at
		// the middle of it plus the skew.
		got := checkClock(context.Background(), func(context.Context) (managerClock, error) {
			return managerClock{Addr: "m:1", Sent: sent, Got: sent.Add(2 * time.Second), ManagerNow: sent.Add(time.Second + c.skew)}, nil
		})
		if got.Status != c.status || !strings.Contains(got.Found, c.found) || !strings.Contains(got.Found, "±1s") {
			t.Errorf("skew %s: %s %q, want %s with %q", c.skew, got.Status, got.Found, c.status, c.found)
		}
	}
	unreachable := checkClock(context.Background(), func(context.Context) (managerClock, error) { return managerClock{}, errors.New("no route") })
	if unreachable.Status != doctorWarn || !strings.Contains(unreachable.Found, "not checked: no route") {
		t.Errorf("an unreachable manager: %+v", unreachable)
	}
}

// Run for real on this (Linux) host: the process platform's lines say
// what it isolates here, as this user, and nothing fails.
func TestDoctorOnThisHost(t *testing.T) {
	t.Parallel()
	cmd := newRootCommand()
	var out, errOut bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	cmd.SetArgs([]string{"--config", "none", "doctor", "--platform", "process", "-o", "json"})
	if err := cmd.ExecuteContext(context.Background()); err != nil {
		t.Fatalf("doctor: %v\n%s", err, out.String())
	}
	var checks []doctorCheck
	if err := json.Unmarshal(out.Bytes(), &checks); err != nil {
		t.Fatalf("doctor -o json: %v\n%s", err, out.String())
	}
	got := map[string]doctorCheck{}
	for _, c := range checks {
		got[c.Check] = c
	}
	for _, name := range []string{"platform", "running as root", "pod network", "resource limits", "storage", "network policy", "process isolation", "address ranges"} {
		if _, ok := got[name]; !ok {
			t.Errorf("no %q line: %+v", name, checks)
		}
	}
	if root := got["running as root"]; (root.Status == doctorOK) != (os.Geteuid() == 0) {
		t.Errorf("running as uid %d, doctor says %+v", os.Geteuid(), root)
	}
	netns := daemon.NetNSAvailable(context.Background(), sys.Exec{})
	if pod := got["pod network"]; (pod.Status == doctorOK) != (netns == "") || netns != "" && !strings.Contains(pod.Found, netns) {
		t.Errorf("namespaces here: %q; doctor says %+v", netns, pod)
	}
	for _, name := range []string{"resource limits", "network policy", "storage"} {
		if got[name].Status != doctorWarn || !strings.Contains(got[name].Found, "no") {
			t.Errorf("%s: the process platform has none, doctor says %+v", name, got[name])
		}
	}
	// Directory volumes are backed up (file by file): storage does not
	// say there are no backups.
	if f := got["storage"].Found; strings.Contains(f, "no zfs volumes or backups") || !strings.Contains(f, "copied one by one") {
		t.Errorf("storage: %q, want what a directory volume's backup is", f)
	}
}

// A manager says its time in its status, which the skew check reads: on
// one host the two clocks agree.
func TestDoctorClockAgainstAManager(t *testing.T) {
	t.Parallel()
	c := testcluster.New(t, testcluster.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	m, err := askClock(ctx, c.Managers[0].Addr, c.AdminFile())
	if err != nil {
		t.Fatal(err)
	}
	if m.ManagerNow.Before(m.Sent) || m.ManagerNow.After(m.Got) {
		t.Fatalf("the manager's time %v is outside the call, %v to %v", m.ManagerNow, m.Sent, m.Got)
	}
	if got := checkClock(ctx, func(context.Context) (managerClock, error) { return m, nil }); got.Status != doctorOK {
		t.Fatalf("same host's clock: %+v", got)
	}
}
