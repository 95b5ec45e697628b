package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/legionbsd/legion/internal/daemon"
)

// --vip and its companions: refused, naming the flag, wherever they
// cannot take effect; read into the daemon's CARP where they can.
func TestVIPFlags(t *testing.T) {
	t.Parallel()
	pw := filepath.Join(t.TempDir(), "vip-password")
	if err := os.WriteFile(pw, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		flags    vipFlags
		platform string
		listen   string
		want     string
	}{
		{vipFlags{iface: "em0"}, daemon.PlatformJails, "0.0.0.0:7470", "--vip-interface and --vip-password-file go with --vip"},
		{vipFlags{addr: "192.0.2.50", iface: "em0", passwordFile: pw, vhid: 1}, daemon.PlatformProcess, "0.0.0.0:7470", "FreeBSD's; this node runs the process platform"},
		{vipFlags{addr: "192.0.2.50", iface: "em0", passwordFile: pw, vhid: 1}, daemon.PlatformJails, "192.0.2.11:7470", "--listen 192.0.2.11:7470"},
		{vipFlags{addr: "vip.example", iface: "em0", passwordFile: pw, vhid: 1}, daemon.PlatformJails, "0.0.0.0:7470", "want an IPv4 address"},
		{vipFlags{addr: "192.0.2.50", passwordFile: pw, vhid: 1}, daemon.PlatformJails, "0.0.0.0:7470", "--vip-interface: required"},
		{vipFlags{addr: "192.0.2.50", iface: "em0", vhid: 1}, daemon.PlatformJails, "0.0.0.0:7470", "--vip-password-file: required"},
		{vipFlags{addr: "192.0.2.50", iface: "em0", passwordFile: pw + ".missing", vhid: 1}, daemon.PlatformJails, "0.0.0.0:7470", "--vip-password-file: open"},
	} {
		if _, err := c.flags.carp(c.platform, c.listen); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v on %s: %v, want an error with %q", c.flags, c.platform, err, c.want)
		}
	}
	got, err := (&vipFlags{addr: "192.0.2.50", iface: "em0", passwordFile: pw, vhid: 4}).carp(daemon.PlatformJails, ":7470")
	if err != nil || got == nil || got.Password != "s3cret" || got.VHID != 4 || got.Interface != "em0" || got.Addr.String() != "192.0.2.50" {
		t.Fatalf("carp() = %+v, %v", got, err)
	}
	if none, err := (&vipFlags{vhid: 1}).carp(daemon.PlatformProcess, "0.0.0.0:7470"); none != nil || err != nil {
		t.Fatalf("without --vip: %+v, %v", none, err)
	}
}
