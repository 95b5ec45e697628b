package main

import (
	"encoding/json"
	"fmt"

	"github.com/legionbsd/legion"
	"github.com/spf13/cobra"
)

func newValidateCommand() *cobra.Command {
	var files []string
	var output, ns string
	cmd := &cobra.Command{
		Use:   "validate -f FILE|DIR|-",
		Short: "Check manifests and print each object as it would be stored",
		Long: `Validate runs every object of the manifests through admission, offline,
and prints each one normalised (every default written out, quantities and
durations in canonical form), or every error found. It exits 1 on any error.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(files) == 0 {
				return fmt.Errorf("validate: -f FILE|DIR|URL|- is required")
			}
			if output != "yaml" && output != "json" {
				return fmt.Errorf("validate: -o %q: expected yaml or json", output)
			}
			objs, err := readManifests(cmd.InOrStdin(), files, ns)
			if err != nil {
				return &exitError{code: 1, msg: err.Error()}
			}
			out := cmd.OutOrStdout()
			for i, o := range objs {
				switch output {
				case "json":
					data, err := json.MarshalIndent(o, "", "  ")
					if err != nil {
						return err
					}
					fmt.Fprintln(out, string(data))
				default:
					data, err := legion.MarshalYAML(o)
					if err != nil {
						return err
					}
					if i > 0 {
						fmt.Fprintln(out, "---")
					}
					fmt.Fprint(out, string(data))
				}
			}
			return nil
		},
	}
	// -f/--filename, as apply and delete take it; --file is what validate
	// took before.
	fileFlag(cmd, &files, "the manifests to check")
	cmd.Flags().StringArrayVar(&files, "file", nil, "")
	cmd.Flags().MarkDeprecated("file", "use -f/--filename, as apply and delete do")
	cmd.Flags().StringVarP(&output, "output", "o", "yaml", "output format: yaml or json")
	manifestNamespaceFlag(cmd, &ns)
	return cmd
}
