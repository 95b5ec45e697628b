package main

import (
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"
)

// dockerService is what each docker service subcommand is here.
var dockerService = map[string]string{
	"create":   "legion create service NAME --image IMAGE",
	"inspect":  "legion describe service NAME, or legion get service NAME -o yaml",
	"logs":     "legion logs NAME",
	"ls":       "legion get services",
	"ps":       "legion tasks NAME",
	"rm":       "legion delete service NAME",
	"rollback": "legion rollback NAME",
	"scale":    "legion scale NAME=REPLICAS",
	"update":   "legion set image NAME CONTAINER=IMAGE, legion scale, or legion edit service NAME",
}

// serviceHabitCommand is docker service, which a Swarm user types by
// habit: hidden, and refused naming the command that does it here,
// whatever flags follow (so not "unknown command" alone).
func serviceHabitCommand() *cobra.Command {
	return &cobra.Command{
		Use:                "service",
		Hidden:             true,
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				if here, ok := dockerService[args[0]]; ok {
					return fmt.Errorf("docker service %s is %s here", args[0], here)
				}
			}
			subs := make([]string, 0, len(dockerService))
			for s := range dockerService {
				subs = append(subs, s)
			}
			slices.Sort(subs)
			return fmt.Errorf("legion has no service command: each of docker service's %s names the command that does it here (legion service ls)", strings.Join(subs, ", "))
		},
	}
}
