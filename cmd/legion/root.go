package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/client"
	"github.com/legionbsd/legion/internal/buildinfo"
	"github.com/spf13/cobra"
	"google.golang.org/grpc/codes"
)

// version is the release this build says it is. Stamp
// internal/buildinfo.Version, not this copy: managers report that one.
var version = buildinfo.Version

func newRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:           "legion",
		Short:         "Legion: a container orchestrator for FreeBSD",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newValidateCommand(), newVersionCommand(), newNodeResolverCommand(), newUpCommand(), newImageCommand(), newLogsCommand(), newExecCommand(), newPortForwardCommand(), newVolumeCommand())
	addClusterCommands(root)
	addStackCommands(root)
	addOpsCommands(root)
	addAutolockCommands(root)
	addBackupCommands(root)
	addAuditCommands(root)
	addEventsCommands(root)
	addCACommands(root)
	addTopCommands(root)
	root.AddCommand(newContextCommand(), newGenManCommand())
	root.AddCommand(newDoctorCommand())
	root.AddCommand(habitCommands()...)
	addSubHabits(root)
	configFlags(root)
	refuseUnknownSubcommands(root)
	sayUsageOnWrongArgs(root)
	return root
}

// sayUsageOnWrongArgs adds each command's usage line to the refusal of
// its arguments: "accepts 1 arg(s), received 3" alone does not say
// what the command takes.
func sayUsageOnWrongArgs(c *cobra.Command) {
	for _, sub := range c.Commands() {
		sayUsageOnWrongArgs(sub)
	}
	check := c.Args
	if check == nil {
		return
	}
	c.Args = func(cmd *cobra.Command, args []string) error {
		if err := check(cmd, args); err != nil {
			return fmt.Errorf("%s: %w; usage: %s", strings.TrimPrefix(cmd.CommandPath(), cmd.Root().Name()+" "), err, cmd.UseLine())
		}
		return nil
	}
}

// refuseUnknownSubcommands makes every command that only groups others
// (node, stack, image, ...) fail on a word that names none of them:
// cobra would print the help and exit 0, so "legion node rm x" looked done.
// Called with no word, such a command still prints its help.
func refuseUnknownSubcommands(c *cobra.Command) {
	for _, sub := range c.Commands() {
		refuseUnknownSubcommands(sub)
	}
	if c == c.Root() || !c.HasSubCommands() || c.Run != nil || c.RunE != nil {
		return
	}
	c.Args = cobra.ArbitraryArgs
	c.RunE = func(cmd *cobra.Command, args []string) error {
		if len(args) == 0 {
			return cmd.Help()
		}
		var names []string
		for _, s := range cmd.Commands() {
			if s.IsAvailableCommand() {
				names = append(names, s.Name())
			}
		}
		return fmt.Errorf("%s: unknown command %q: expected one of %s", cmd.CommandPath(), args[0], strings.Join(names, ", "))
	}
}

// serverVersionWait bounds how long legion version waits for a manager
// to say its build: past the client's dial limit, it is unreachable.
const serverVersionWait = client.DialRetry + time.Second

// buildVersion is one build's identity, as legion version -o json prints
// it.
type buildVersion struct {
	Version   string `json:"version"`
	Commit    string `json:"commit"`
	GoVersion string `json:"goVersion"`
}

// versionReport is legion version's answer: the server's build, or why
// there is none (serverError: "unreachable (...)" when nothing answered,
// "unknown (...)" when a manager answered without saying).
type versionReport struct {
	Client      buildVersion  `json:"client"`
	ObjectModel string        `json:"objectModel"`
	Server      *buildVersion `json:"server,omitempty"`
	ServerAddr  string        `json:"serverAddress"`
	ServerError string        `json:"serverError,omitempty"`
}

func newVersionCommand() *cobra.Command {
	var output string
	var clientOnly bool
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print Legion's version, commit and Go, and those of the manager reached",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if output != "" && output != "json" && output != "yaml" {
				return fmt.Errorf("--output %q: version prints text, json or yaml", output)
			}
			r := versionReport{Client: buildVersion{buildinfo.Version, buildinfo.Commit(), buildinfo.GoVersion()}, ObjectModel: legion.APIVersion}
			if !clientOnly {
				r.ServerAddr = serverSetting(cmd)
				r.Server, r.ServerError = serverBuild(cmd)
			}
			out := cmd.OutOrStdout()
			switch output {
			case "json":
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				return enc.Encode(r)
			case "yaml":
				data, err := yamlOf(r)
				if err != nil {
					return err
				}
				_, err = out.Write(data)
				return err
			}
			fmt.Fprintf(out, "legion %s (commit %s, %s, object model %s)\n", r.Client.Version, r.Client.Commit, r.Client.GoVersion, r.ObjectModel)
			switch {
			case clientOnly:
			case r.Server != nil:
				fmt.Fprintf(out, "Server: legion %s (commit %s, %s) at %s\n", r.Server.Version, r.Server.Commit, r.Server.GoVersion, r.ServerAddr)
			default:
				fmt.Fprintf(out, "Server: %s\n", r.ServerError)
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "json or yaml: print it so, as kubectl version does")
	cmd.Flags().BoolVar(&clientOnly, "client", false, "this build only: ask no manager")
	return cmd
}

// serverBuild asks the manager in effect for its build, with the
// credentials in effect if any (a fresh daemon answers without), for no
// longer than serverVersionWait unless a request timeout is set. The
// reason for no answer starts with "unreachable" when nothing answered.
func serverBuild(cmd *cobra.Command) (*buildVersion, string) {
	addr := serverSetting(cmd)
	retry, err := requestTimeoutSetting(cmd)
	if err != nil {
		return nil, err.Error()
	}
	wait := serverVersionWait
	if retry > 0 {
		wait = retry
	}
	cl, err := client.New(client.Options{Server: addr, CredentialsFile: credentialsSetting(cmd), Retry: retry})
	if err != nil {
		return nil, "unknown (" + err.Error() + ")"
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctxOf(cmd), wait)
	defer cancel()
	st, err := cl.Status(ctx)
	switch {
	case err != nil && ctx.Err() != nil:
		return nil, fmt.Sprintf("unreachable (%s: no answer within %s)", addr, wait)
	case client.Code(err) == codes.Unavailable:
		return nil, "unreachable (" + err.Error() + ")"
	case err != nil:
		return nil, "unknown (" + err.Error() + ")"
	case st.Version == "":
		return nil, fmt.Sprintf("unknown (%s answers but is too old to say its version)", addr)
	}
	return &buildVersion{st.Version, st.Commit, st.GoVersion}, ""
}
