package main

import "github.com/spf13/cobra"

// addStackCommands adds `legion stack` (compose files). Owned by the
// compose work.
func addStackCommands(root *cobra.Command) {}
