package daemon

import (
	"bytes"
	"context"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/legionbsd/legion/sys"
)

// linuxLines are the lines of f that concern the Linux ABI.
func linuxLines(lines []string) []string {
	var out []string
	for _, l := range lines {
		if strings.Contains(l, "linux") || strings.Contains(l, "linprocfs") || strings.Contains(l, "linsysfs") || strings.Contains(l, "fdescfs") ||
			strings.Contains(l, "tmpfs") || strings.Contains(l, "fallback_brand") {
			out = append(out, l)
		}
	}
	return out
}

// legion daemon --linux on jails: the Linux ABI's modules are loaded and
// an unset fallback brand made Linux before the node serves, and the node
// says it runs Linux images; a brand the host chose is kept with a
// warning; a module that will not load stops the node, naming it. Without
// --linux none of it is done and the node runs no Linux images. FreeBSD's
// answers: sysctl prints values and changes on stdout, kldload its
// failures on stderr.
func TestJailsNodeWithLinux(t *testing.T) {
	t.Parallel()
	mods := []string{"kldload -n linux64", "kldload -n linprocfs", "kldload -n linsysfs", "kldload -n fdescfs", "kldload -n tmpfs"}
	for _, tc := range []struct {
		name      string
		linux     bool
		answers   map[string]sys.Answer
		wantLines []string
		wantErr   string
		wantWarn  string
	}{
		{name: "brand unset", linux: true,
			answers: map[string]sys.Answer{
				"sysctl -n kern.elf64.fallback_brand": {Stdout: "-1\n"},
				"sysctl kern.elf64.fallback_brand=3":  {Stdout: "kern.elf64.fallback_brand: -1 -> 3\n"}},
			wantLines: append(append([]string{}, mods...), "sysctl -n kern.elf64.fallback_brand", "sysctl kern.elf64.fallback_brand=3")},
		{name: "brand chosen", linux: true,
			answers:   map[string]sys.Answer{"sysctl -n kern.elf64.fallback_brand": {Stdout: "9\n"}},
			wantLines: append(append([]string{}, mods...), "sysctl -n kern.elf64.fallback_brand"),
			wantWarn:  "static Linux programs will not run"},
		{name: "module missing", linux: true,
			answers: map[string]sys.Answer{"kldload -n linsysfs": {Code: 1, Stderr: "kldload: can't load linsysfs: No such file or directory\n"}},
			wantErr: "linsysfs"},
		{name: "brand not settable", linux: true,
			answers: map[string]sys.Answer{
				"sysctl -n kern.elf64.fallback_brand": {Stdout: "-1\n"},
				"sysctl kern.elf64.fallback_brand=3":  {Code: 1, Stderr: "sysctl: kern.elf64.fallback_brand: Operation not permitted\n"}},
			wantErr: "Operation not permitted"},
		{name: "without --linux"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			own, lines := sys.NewFake(), []string{}
			r := firstOf{own: own, host: freshHost(), mu: &sync.Mutex{}, lines: &lines}
			for k, a := range tc.answers {
				own.On(k, a)
				r.prefixes = append(r.prefixes, k)
			}
			o := jailsOptions(t, t.TempDir(), own)
			o.Runner = r
			o.Linux = tc.linux
			var logs bytes.Buffer
			p, err := openPlatform(ctx, o, "/usr/local/bin/legion", slog.New(slog.NewTextHandler(&logs, nil)))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one naming %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer p.close()
			r.mu.Lock()
			got := linuxLines(lines)
			r.mu.Unlock()
			if d := cmp.Diff(tc.wantLines, got, cmpopts.EquateEmpty()); d != "" {
				t.Errorf("Linux ABI commands (-want +got):\n%s", d)
			}
			if st := nodeStatus("n1", p, Options{}); st.Platform.Linux != tc.linux {
				t.Errorf("node.platform.linux %v, want %v", st.Platform.Linux, tc.linux)
			}
			if tc.wantWarn != "" && !strings.Contains(logs.String(), tc.wantWarn) {
				t.Errorf("log does not warn %q:\n%s", tc.wantWarn, logs.String())
			}
		})
	}
}

// firstOf answers a command with own when one of own's prefixes starts
// it, else with host, and keeps every command line in order.
type firstOf struct {
	own      *sys.Fake
	prefixes []string
	host     *sys.Fake
	mu       *sync.Mutex
	lines    *[]string
}

func (r firstOf) Run(ctx context.Context, c sys.Cmd) (sys.Result, error) {
	r.mu.Lock()
	*r.lines = append(*r.lines, c.String())
	r.mu.Unlock()
	for _, p := range r.prefixes {
		if strings.HasPrefix(c.String(), p) {
			return r.own.Run(ctx, c)
		}
	}
	return r.host.Run(ctx, c)
}

// A process node runs Linux images where its host is Linux, --linux or
// not; elsewhere it has no Linux ABI, and --linux is refused by name.
func TestProcessNodeLinux(t *testing.T) {
	t.Parallel()
	for _, flag := range []bool{false, true} {
		got, err := linuxImages(Options{Platform: PlatformProcess, Linux: flag})
		switch runtime.GOOS {
		case "linux":
			if err != nil || !got {
				t.Errorf("--linux=%v on Linux: %v %v, want Linux images", flag, got, err)
			}
		default:
			if got || (flag && (err == nil || !strings.Contains(err.Error(), "--linux"))) || (!flag && err != nil) {
				t.Errorf("--linux=%v on %s: %v %v", flag, runtime.GOOS, got, err)
			}
		}
	}
}
