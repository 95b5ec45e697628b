package main

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"

	"github.com/spf13/pflag"

	"github.com/legionbsd/legion/internal/daemon"
	"github.com/legionbsd/legion/netbsd"
)

// vipFlags are legion daemon's CARP manager address flags.
type vipFlags struct {
	addr, iface, passwordFile string
	vhid                      int
}

func (v *vipFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&v.addr, "vip", "", "an IPv4 address the managers share on their link as a CARP virtual host (FreeBSD), so clients reach whichever manager runs; needs --vip-interface and --vip-password-file")
	fs.StringVar(&v.iface, "vip-interface", "", "the interface on the managers' shared link that holds --vip")
	fs.StringVar(&v.passwordFile, "vip-password-file", "", "a file holding the password that authenticates the managers' CARP advertisements (at most 20 bytes, the same on every manager)")
	fs.IntVar(&v.vhid, "vip-vhid", 1, "the CARP virtual host id of --vip, the same on every manager (1-255)")
}

// carp reads the flags into the CARP a daemon runs, or nil without --vip.
// The other --vip-* flags alone, or --vip on a platform without CARP, are
// refused rather than ignored.
func (v *vipFlags) carp(platform, listen string) (*netbsd.CARP, error) {
	if v.addr == "" {
		if v.iface != "" || v.passwordFile != "" {
			return nil, fmt.Errorf("--vip-interface and --vip-password-file go with --vip, which is not given")
		}
		return nil, nil
	}
	if platform != daemon.PlatformJails {
		return nil, fmt.Errorf("--vip %s: the shared manager address is a CARP virtual host, FreeBSD's; this node runs the %s platform", v.addr, platform)
	}
	addr, err := netip.ParseAddr(v.addr)
	if err != nil {
		return nil, fmt.Errorf("--vip %q: want an IPv4 address", v.addr)
	}
	// The API must answer on the shared address too.
	if host, _, err := net.SplitHostPort(listen); err != nil || (host != "" && host != "0.0.0.0" && host != addr.String()) {
		return nil, fmt.Errorf("--listen %s: with --vip the API listens on 0.0.0.0 (the default), so it answers on %s too", listen, addr)
	}
	var password string
	if v.passwordFile != "" {
		b, err := os.ReadFile(v.passwordFile)
		if err != nil {
			return nil, fmt.Errorf("--vip-password-file: %w", err)
		}
		password = strings.TrimRight(string(b), "\r\n")
	}
	c := &netbsd.CARP{Interface: v.iface, Addr: addr, VHID: v.vhid, Password: password}
	return c, c.Validate()
}
