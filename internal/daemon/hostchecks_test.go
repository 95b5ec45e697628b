package daemon

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/legionbsd/legion/internal/golden"
	"github.com/legionbsd/legion/sys"
)

// readyJailsHost scripts a host with everything a jails node needs, in
// the tools' own words; rules added before it take precedence.
func readyJailsHost(f *sys.Fake) *sys.Fake {
	return f.On("sysctl -n kern.racct.enable", sys.Answer{Stdout: "1\n"}).
		On("pfctl -s info", sys.PfInfo(true)).
		On("pfctl -s nat", sys.Answer{Stdout: "nat-anchor \"legion/*\" all\nrdr-anchor \"legion/*\" all\n"}).
		On("pfctl -s rules", sys.Answer{Stdout: "anchor \"legion/*\" all\npass all flags S/SA keep state\n"}).
		On("devfs rule -s 4 show", sys.Answer{Stdout: "100 include 1\n200 include 2\n300 include 3\n400 path fuse unhide\n500 path zfs unhide\n"}).
		On("devfs rule -s 1 show", sys.Answer{Stdout: "100 hide\n"}).
		On("zfs list -H -o name zroot/legion", sys.Answer{Stdout: "zroot/legion\n"})
}

// The start-up checks on a ready host and on hosts missing one piece
// each: what the node runs, what it finds, what it fixes itself and what
// it tells the operator to do (testdata/hostchecks.golden).
func TestHostChecksGolden(t *testing.T) {
	t.Parallel()
	noSuchDataset := sys.Answer{Code: 1, Stderr: "cannot open 'zroot/legion': dataset does not exist\n"}
	cases := []struct {
		name    string
		pfMain  bool
		script  func(f *sys.Fake)
		failing string // the check that fails; empty: none
		ready   bool
	}{
		{name: "ready host", ready: true},
		{name: "if_wg missing", failing: "kernel module if_wg", script: func(f *sys.Fake) {
			f.On("kldload -n if_wg", sys.Answer{Code: 1, Stderr: "kldload: can't load if_wg: No such file or directory\n"})
		}},
		{name: "racct off", ready: true, failing: "racct (kern.racct.enable)", script: func(f *sys.Fake) {
			f.On("sysctl -n kern.racct.enable", sys.Answer{Stdout: "0\n"})
		}},
		{name: "kernel without racct", ready: true, failing: "racct (kern.racct.enable)", script: func(f *sys.Fake) {
			f.On("sysctl -n kern.racct.enable", sys.SysctlUnknown("kern.racct.enable"))
		}},
		{name: "pf disabled: the node enables it", ready: true, script: func(f *sys.Fake) {
			f.On("pfctl -s info", sys.PfInfo(false)).On("pfctl -e", sys.PfEnabled())
		}},
		{name: "pf disabled, enabled meanwhile", ready: true, script: func(f *sys.Fake) {
			f.On("pfctl -s info", sys.PfInfo(false)).On("pfctl -e", sys.PfAlreadyEnabled())
		}},
		{name: "pf not loaded", failing: "pf enabled", script: func(f *sys.Fake) {
			f.On("pfctl -s info", sys.Answer{Code: 1, Stderr: "pfctl: /dev/pf: No such file or directory\n"})
		}},
		{name: "main ruleset without the anchor calls", failing: `pf main ruleset calls "legion/*"`, script: func(f *sys.Fake) {
			f.On("pfctl -s nat", sys.Answer{}).On("pfctl -s rules", sys.Answer{Stdout: "block drop in all\npass out all flags S/SA keep state\n"})
		}},
		{name: "empty main ruleset", pfMain: true, ready: true, script: func(f *sys.Fake) {
			f.On("pfctl -s nat", sys.Answer{}).On("pfctl -s rules", sys.Answer{})
		}},
		{name: "the operator's own main ruleset without the calls", pfMain: true, failing: `pf main ruleset calls "legion/*"`, script: func(f *sys.Fake) {
			f.On("pfctl -s nat", sys.Answer{}).On("pfctl -s rules", sys.Answer{Stdout: "block drop in all\n"})
		}},
		{name: "devfs rulesets not loaded", failing: "devfs ruleset 4 (devfsrules_jail)", script: func(f *sys.Fake) {
			f.On("devfs rule -s 4 show", sys.Answer{})
		}},
		{name: "devfs ruleset 4 hiding nothing", failing: "devfs ruleset 4 (devfsrules_jail)", script: func(f *sys.Fake) {
			f.On("devfs rule -s 4 show", sys.Answer{Stdout: "100 path zfs unhide\n"})
		}},
		{name: "ZFS root missing on the pool: the node creates it", ready: true, script: func(f *sys.Fake) {
			f.On("zfs list -H -o name zroot/legion", noSuchDataset).On("zpool list -H -o name zroot", sys.Answer{Stdout: "zroot\n"})
		}},
		{name: "no ZFS pool", failing: "ZFS root zroot/legion", script: func(f *sys.Fake) {
			f.On("zfs list -H -o name zroot/legion", sys.Answer{Code: 1, Stderr: "cannot open 'zroot/legion': dataset does not exist\n"}).
				On("zpool list -H -o name zroot", sys.Answer{Code: 1, Stderr: "cannot open 'zroot': no such pool\n"})
		}},
	}
	ctx := context.Background()
	var b strings.Builder
	// The ready host is shown whole; the others by what differs from it:
	// the commands it did not run and the checks that came out otherwise.
	var readyCmds map[string]bool
	var readyFound map[string]string
	for _, c := range cases {
		f := sys.NewFake()
		if c.script != nil {
			c.script(f)
		}
		readyJailsHost(f)
		checks := CheckHost(ctx, f, HostCheckOptions{ZFSRoot: DefaultZFSRoot, PFMain: c.pfMain})
		err := HostReady(checks)
		if (err == nil) != c.ready {
			t.Errorf("%s: ready %v, want %v (%v)", c.name, err == nil, c.ready, err)
		}
		var failed []string
		for _, ch := range checks {
			if !ch.OK {
				failed = append(failed, ch.Name)
				if ch.Fix == "" {
					t.Errorf("%s: %s fails naming no fix", c.name, ch.Name)
				}
				if ch.Needed && (err == nil || !strings.Contains(err.Error(), ch.Fix)) {
					t.Errorf("%s: the refusal does not carry the fix of %s: %v", c.name, ch.Name, err)
				}
			}
		}
		var want []string
		if c.failing != "" {
			want = []string{c.failing}
		}
		if d := cmp.Diff(want, failed); d != "" {
			t.Errorf("%s: failing checks (-want +got):\n%s", c.name, d)
		}
		first := readyCmds == nil
		if first {
			readyCmds, readyFound = map[string]bool{}, map[string]string{}
		}
		fmt.Fprintf(&b, "== %s", c.name)
		if c.pfMain {
			b.WriteString(" (--pf-main)")
		}
		b.WriteString("\n")
		for _, cmd := range f.Calls() {
			if first {
				readyCmds[cmd.String()] = true
			} else if readyCmds[cmd.String()] {
				continue
			}
			fmt.Fprintf(&b, "$ %s\n", cmd)
			if len(cmd.Stdin) > 0 {
				for _, l := range strings.Split(strings.TrimSuffix(string(cmd.Stdin), "\n"), "\n") {
					fmt.Fprintf(&b, "  < %s\n", l)
				}
			}
		}
		for _, ch := range checks {
			if first {
				readyFound[ch.Name] = ch.Found
			} else if ch.OK && readyFound[ch.Name] == ch.Found {
				continue
			}
			mark := "ok  "
			if !ch.OK {
				mark = "WARN"
				if ch.Needed {
					mark = "FAIL"
				}
			}
			fmt.Fprintf(&b, "%s %s: %s\n", mark, ch.Name, ch.Found)
			if ch.Fix != "" {
				fmt.Fprintf(&b, "     fix: %s\n", ch.Fix)
			}
		}
		if err != nil {
			fmt.Fprintf(&b, "refused: %s\n", err)
		} else {
			b.WriteString("serves\n")
		}
		b.WriteString("\n")
	}
	golden.Check(t, filepath.Join("testdata", "hostchecks.golden"), b.String())
}

// The daemon runs the checks before its agent waits for init or join, and
// a host missing a needed piece stops it with the fixes; a process node
// is not checked.
func TestCheckJailsHostRefusesBeforeServing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := readyJailsHost(sys.NewFake().On("devfs rule -s 4 show", sys.Answer{}))
	err := checkJailsHost(ctx, Options{Platform: PlatformJails, ZFSRoot: DefaultZFSRoot, Runner: f}, quietLog())
	if err == nil || !strings.Contains(err.Error(), "service devfs restart") {
		t.Fatalf("a host without the jail devfs ruleset must be refused naming the fix, got %v", err)
	}
	p := sys.NewFake()
	if err := checkJailsHost(ctx, Options{Platform: PlatformProcess, Runner: p}, quietLog()); err != nil || len(p.Calls()) != 0 {
		t.Fatalf("a process node ran %q, err %v", p.Lines(), err)
	}
}
