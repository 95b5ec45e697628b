package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/legionbsd/legion/client"
	"github.com/legionbsd/legion/internal/daemon"
	"github.com/legionbsd/legion/sys"
	"github.com/spf13/cobra"
)

// doctorClockWait bounds the clock skew check's call to a manager.
const doctorClockWait = 5 * time.Second

func newDoctorCommand() *cobra.Command {
	var o doctorOptions
	var manager, output string
	cmd := &cobra.Command{
		Use:   "doctor",
		Short: "Check this host before it runs a node, saying per check ok or what to do; it changes nothing",
		Long: "legion doctor checks what a node on this host needs, with the flags the daemon would be given, " +
			"and prints each check with what it found and what to do. It only looks: what the daemon would " +
			"see to itself at start (loading modules, enabling pf, creating the ZFS root) is shown as a warning. " +
			"It exits non-zero when a needed check fails.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if output != "" && output != "json" {
				return fmt.Errorf("--output %q: doctor prints a table or json", output)
			}
			h := doctorHost{OS: runtime.GOOS, EUID: os.Geteuid(), Nets: daemon.HostNets, NetNS: daemon.NetNSAvailable}
			addr := manager
			if addr == "" {
				if s := serverSetting(cmd); s != client.DefaultServer {
					addr = s // a context or --server names a cluster
				}
			}
			if addr != "" {
				creds := credentialsSetting(cmd)
				h.Clock = func(ctx context.Context) (managerClock, error) { return askClock(ctx, addr, creds) }
			}
			checks := runDoctor(ctxOf(cmd), sys.Exec{}, h, o)
			if err := printDoctor(cmd.OutOrStdout(), checks, output == "json"); err != nil {
				return err
			}
			return doctorFailed(checks)
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&o.Platform, "platform", daemon.DefaultPlatform(), "what pods would run on: jails or process")
	fs.StringVar(&o.ZFSRoot, "zfs-root", daemon.DefaultZFSRoot, "the dataset images and container roots would live under (jails)")
	fs.BoolVar(&o.Linux, "linux", false, "check for Linux images too (linux64 and its file systems)")
	fs.BoolVar(&o.PFMain, "pf-main", false, "the daemon would load the anchor calls onto an empty main ruleset")
	rangeFlags(fs, &o.PodCIDR, &o.ServiceCIDR)
	fs.StringVar(&manager, "manager", "", "a manager's address to compare this host's clock with (default: the server of the context in effect, if any)")
	fs.StringVarP(&output, "output", "o", "", "json: print the checks as JSON")
	return cmd
}

// askClock asks the manager at addr for its time, noting this host's
// clock around the call.
func askClock(ctx context.Context, addr, creds string) (managerClock, error) {
	cl, err := client.New(client.Options{Server: addr, CredentialsFile: creds})
	if err != nil {
		return managerClock{}, err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, doctorClockWait)
	defer cancel()
	m := managerClock{Addr: addr, Sent: time.Now()}
	st, err := cl.Status(ctx)
	m.Got = time.Now()
	if err != nil {
		return managerClock{}, fmt.Errorf("asking %s for its time: %w", addr, err)
	}
	m.ManagerNow = st.Now
	return m, nil
}

// printDoctor writes the checks as a table (CHECK STATUS FOUND FIX) or
// as JSON.
func printDoctor(w io.Writer, checks []doctorCheck, asJSON bool) error {
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(checks)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "CHECK\tSTATUS\tFOUND\tFIX")
	for _, c := range checks {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", oneLine(c.Check), c.Status, oneLine(c.Found), oneLine(fixOrDash(c.Fix)))
	}
	return tw.Flush()
}

func fixOrDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
