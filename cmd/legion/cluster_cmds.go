package main

import "github.com/spf13/cobra"

// addClusterCommands adds the commands that talk to a cluster (daemon,
// init, join, apply, get, ...). Owned by the control-plane work.
func addClusterCommands(root *cobra.Command) {}
