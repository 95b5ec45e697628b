package netbsd

import (
	"context"
	"net/netip"
	"strings"
	"testing"

	"github.com/legionbsd/legion/sys"
)

// em0 as `ifconfig em0 inet` prints it (sbin/ifconfig/af_inet.c): the
// host's own address, and with held the CARP address, a /32 with its vhid.
func em0Inet(held bool) sys.Answer {
	out := "em0: flags=1008843<UP,BROADCAST,RUNNING,SIMPLEX,MULTICAST,LOWER_UP> metric 0 mtu 1500\n" +
		"\toptions=4e524bb<RXCSUM,TXCSUM,VLAN_MTU,VLAN_HWTAGGING,JUMBO_MTU,VLAN_HWCSUM,LRO,WOL_MAGIC,VLAN_HWFILTER,VLAN_HWTSO,RXCSUM_IPV6,TXCSUM_IPV6,HWSTATS,MEXTPG>\n" +
		"\tinet 192.0.2.11 netmask 0xffffff00 broadcast 192.0.2.255\n"
	if held {
		out += "\tinet 192.0.2.50 netmask 0xffffffff broadcast 192.0.2.50 vhid 7\n"
	}
	return sys.Answer{Stdout: out}
}

func testCARP(r sys.Runner) CARP {
	return CARP{Runner: r, Interface: "em0", Addr: netip.MustParseAddr("192.0.2.50"), VHID: 7, Password: "s3cret-vip"}
}

// The commands a manager runs for the API address through its life: carp
// loaded; as a follower the address added with the followers' skew; as
// leader, the address already there, the leaders' skew and master forced;
// released on stop, and released again when already gone (ifconfig's
// EADDRNOTAVAIL, on stderr as Perror prints it, is not a failure).
func TestCARPCommands(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var d doc

	f := sys.NewFake()
	c := testCARP(f)
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if err := c.Setup(ctx); err != nil {
		t.Fatal(err)
	}
	d.section("setup", transcript(f.Calls()))

	f = sys.NewFake().On("ifconfig em0 inet", em0Inet(false))
	if err := testCARP(f).Hold(ctx, false); err != nil {
		t.Fatal(err)
	}
	d.section("follower, address not held yet", transcript(f.Calls()))

	f = sys.NewFake().On("ifconfig em0 inet", em0Inet(true))
	if err := testCARP(f).Hold(ctx, true); err != nil {
		t.Fatal(err)
	}
	d.section("leader, address held", transcript(f.Calls()))

	f = sys.NewFake()
	if err := testCARP(f).Release(ctx); err != nil {
		t.Fatal(err)
	}
	d.section("release", transcript(f.Calls()))

	f = sys.NewFake().On("ifconfig em0 inet 192.0.2.50 -alias",
		sys.Answer{Code: 1, Stderr: "ifconfig: ioctl (SIOCDIFADDR): Can't assign requested address\n"})
	if err := testCARP(f).Release(ctx); err != nil {
		t.Fatalf("releasing an address already gone: %v", err)
	}
	d.section("release, already gone", transcript(f.Calls()))
	golden(t, "carp", d.String())
}

// A failure other than the address being gone is reported, naming the
// flag; and a vhid of the wrong number of another address is not taken
// for ours.
func TestCARPFailuresAndOtherVHIDs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := sys.NewFake().On("ifconfig em0 inet", em0Inet(true)).On("ifconfig em0 vhid", sys.Answer{Code: 1, Stderr: "ifconfig: SIOCSVH: Operation not permitted\n"})
	if err := testCARP(f).Hold(ctx, true); err == nil || !strings.Contains(err.Error(), "--vip") {
		t.Fatalf("Hold with SIOCSVH refused: %v, want an error naming --vip", err)
	}
	f = sys.NewFake().On("ifconfig em0 inet 192.0.2.50 -alias", sys.Answer{Code: 1, Stderr: "ifconfig: ioctl (SIOCDIFADDR): permission denied\n"})
	if err := testCARP(f).Release(ctx); err == nil {
		t.Fatal("Release hid a failure")
	}
	other := "em0: flags=1008843<UP> metric 0 mtu 1500\n\tinet 192.0.2.50 netmask 0xffffffff broadcast 192.0.2.50 vhid 8\n"
	if carpAddrHeld(other, netip.MustParseAddr("192.0.2.50"), 7) {
		t.Error("an address of vhid 8 was taken for vhid 7's")
	}
	if carpAddrHeld("\tinet 192.0.2.5 netmask 0xffffffff vhid 7\n", netip.MustParseAddr("192.0.2.50"), 7) {
		t.Error("192.0.2.5 was taken for 192.0.2.50")
	}
}

func TestCARPValidate(t *testing.T) {
	t.Parallel()
	ok := testCARP(nil)
	for _, c := range []struct {
		edit func(*CARP)
		want string
	}{
		{func(c *CARP) { c.Addr = netip.MustParseAddr("2001:db8::5") }, "--vip"},
		{func(c *CARP) { c.Interface = "" }, "--vip-interface"},
		{func(c *CARP) { c.VHID = 0 }, "--vip-vhid"},
		{func(c *CARP) { c.VHID = 256 }, "--vip-vhid"},
		{func(c *CARP) { c.Password = "" }, "--vip-password-file"},
		{func(c *CARP) { c.Password = strings.Repeat("x", 21) }, "keeps only 20"},
		{func(c *CARP) { c.Password = "two words" }, "white space"},
	} {
		bad := ok
		c.edit(&bad)
		if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want an error with %q", bad, err, c.want)
		}
	}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
}
