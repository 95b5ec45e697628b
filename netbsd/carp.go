package netbsd

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/legionbsd/legion/sys"
)

// The CARP advertisement skews (carp(4), in 1/256 s added to the base
// interval): the leader advertises fastest, so it wins the address, and
// the followers slower, so one of them takes it over only when no leader
// holding it advertises any more.
const (
	CARPLeaderSkew   = 0
	CARPFollowerSkew = 100
	// CARPRefresh is how often a manager sets its CARP state again, so a
	// change made by hand or lost in a link flap does not last.
	CARPRefresh = 5 * time.Second
	// carpKeyLen is CARP_KEY_LEN in netinet/ip_carp.h: ifconfig copies at
	// most this many bytes of the password, so a longer one would be cut
	// short without a word.
	carpKeyLen  = 20
	carpMaxVHID = 255
)

// CARP is the managers' shared API address (legion daemon --vip): each
// manager on the link puts Addr on Interface as a carp(4) virtual host;
// the one leading forces itself master, and a stop gives the address up
// at once rather than after CARP's timeout.
type CARP struct {
	Runner    sys.Runner
	Interface string
	Addr      netip.Addr // IPv4, held as a /32
	VHID      int        // 1-255, the same on every manager
	Password  string     // authenticates the advertisements
}

// Validate says, naming the flag, what is wrong with the settings.
func (c CARP) Validate() error {
	switch {
	case !c.Addr.IsValid() || !c.Addr.Is4():
		return fmt.Errorf("--vip %q: want an IPv4 address (held as a /32 on --vip-interface)", c.Addr)
	case c.Interface == "":
		return errors.New("--vip-interface: required with --vip: the interface on the managers' shared link")
	case c.VHID < 1 || c.VHID > carpMaxVHID:
		return fmt.Errorf("--vip-vhid %d: want 1 to %d, the same on every manager", c.VHID, carpMaxVHID)
	case c.Password == "":
		return errors.New("--vip-password-file: required with --vip, and not empty: it authenticates the managers' CARP advertisements")
	case len(c.Password) > carpKeyLen:
		return fmt.Errorf("--vip-password-file: the password is %d bytes; carp(4) keeps only %d", len(c.Password), carpKeyLen)
	case strings.ContainsAny(c.Password, " \t\r\n"):
		return errors.New("--vip-password-file: the password may not contain white space")
	}
	return nil
}

// Setup loads carp(4).
func (c CARP) Setup(ctx context.Context) error {
	if _, err := sys.Run(ctx, c.Runner, "kldload", "-n", "carp"); err != nil {
		return fmt.Errorf("loading carp for --vip: %w", err)
	}
	return nil
}

// Hold puts the address on the interface, or keeps it there, with the
// skew of this manager's role; a leader forces itself master, as it is
// the one that should answer.
func (c CARP) Hold(ctx context.Context, leader bool) error {
	skew := CARPFollowerSkew
	if leader {
		skew = CARPLeaderSkew
	}
	vhid := strconv.Itoa(c.VHID)
	res, err := sys.Run(ctx, c.Runner, "ifconfig", c.Interface, "inet")
	if err != nil {
		return fmt.Errorf("--vip: reading %s's addresses: %w", c.Interface, err)
	}
	// The Handbook's form: the virtual host's settings (SIOCSVH makes it
	// or updates it), with the address added when it is not there yet.
	args := []string{c.Interface, "vhid", vhid, "advskew", strconv.Itoa(skew), "pass", c.Password}
	if !carpAddrHeld(string(res.Stdout), c.Addr, c.VHID) {
		args = append(args, "alias", c.Addr.String()+"/32")
	}
	if _, err := sys.Run(ctx, c.Runner, "ifconfig", args...); err != nil {
		return fmt.Errorf("--vip: holding %s as vhid %s on %s: %w", c.Addr, vhid, c.Interface, err)
	}
	if leader {
		if _, err := sys.Run(ctx, c.Runner, "ifconfig", c.Interface, "vhid", vhid, "state", "master"); err != nil {
			return fmt.Errorf("--vip: making this manager master of vhid %s: %w", vhid, err)
		}
	}
	return nil
}

// Release takes the address off the interface, so another manager's
// CARP takes it over at its next advertisement. An address already gone
// (ifconfig: "Can't assign requested address") is released.
func (c CARP) Release(ctx context.Context) error {
	_, err := sys.Run(ctx, c.Runner, "ifconfig", c.Interface, "inet", c.Addr.String(), "-alias")
	if err != nil && !sys.IsExit(err, "Can't assign requested address") {
		return fmt.Errorf("--vip: removing %s from %s: %w", c.Addr, c.Interface, err)
	}
	return nil
}

// carpAddrHeld reads `ifconfig IF inet` for a line "inet ADDR ... vhid N".
func carpAddrHeld(out string, addr netip.Addr, vhid int) bool {
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || f[0] != "inet" || f[1] != addr.String() {
			continue
		}
		for i := 2; i+1 < len(f); i++ {
			if f[i] == "vhid" && f[i+1] == strconv.Itoa(vhid) {
				return true
			}
		}
	}
	return false
}
