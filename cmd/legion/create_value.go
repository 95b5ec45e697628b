package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/client"
	"github.com/spf13/cobra"
)

// createValueCommand is legion create secret and create config: one value
// from a file or standard input, as docker secret create and docker
// config create take it. A Legion Secret or Config holds one value, where
// a Kubernetes one holds a map, so kubectl's --from-literal KEY=VALUE has
// no meaning here and is refused, saying so.
func createValueCommand(c *clusterCLI, kind legion.Kind) *cobra.Command {
	noun := strings.ToLower(string(kind))
	var ns, fromFile, fromLiteral string
	var labels []string
	cmd := &cobra.Command{
		Use:   noun + " NAME [FILE|-]",
		Short: "Make a " + string(kind) + " of one value, read from FILE or standard input (-), as docker " + noun + " create does",
		Long: `Create ` + noun + ` makes a ` + string(kind) + ` named NAME whose value is FILE's content
(or standard input's, for - or --from-file -), at most 500 KiB. One already
there is refused, not replaced: legion apply or legion edit change it. Its
value is never taken from the command line, where the shell's history
would keep it.`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			what := "create " + noun
			if fromLiteral != "" {
				return fmt.Errorf("%s: --from-literal: a %s holds one value, not keys, and a value on the command line stays in the shell's history: give it as a file (legion create %s NAME FILE) or on standard input (legion create %s NAME -)", what, kind, noun, noun)
			}
			source := fromFile
			if len(args) == 2 {
				if source != "" {
					return fmt.Errorf("%s: give the value's file as FILE or as --from-file, not both", what)
				}
				source = args[1]
			}
			if source == "" {
				return fmt.Errorf("%s: expected FILE, or - for standard input, after NAME", what)
			}
			name := args[0]
			if err := legion.ValidName(name); err != nil {
				return fmt.Errorf("%s: name %q: %w", what, name, err)
			}
			lbls, err := keyValues("--label", labels)
			if err != nil {
				return fmt.Errorf("%s: %w", what, err)
			}
			data, err := readValue(cmd.InOrStdin(), source)
			if err != nil {
				return fmt.Errorf("%s: %w", what, err)
			}
			o, _ := legion.New(kind)
			m := o.GetMetadata()
			m.Name, m.Namespace, m.Labels = name, ns, lbls
			switch v := o.(type) {
			case *legion.Secret:
				v.Spec.Data = data
			case *legion.Config:
				v.Spec.Data = data
			}
			cl, err := c.connect(cmd)
			if err != nil {
				return err
			}
			defer cl.Close()
			res, err := createNew(ctxOf(cmd), cl, o, client.ApplyOptions{Brief: true})
			if errors.Is(err, client.ErrAborted) {
				return fmt.Errorf("%s: %s %s exists: legion apply or legion edit change it", what, noun, legion.DisplayName(o))
			}
			if err != nil {
				return fmt.Errorf("%s: %w", what, err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s created (%d bytes)\n", ref(res.Object), len(data))
			return nil
		},
	}
	cmd.Flags().StringVarP(&ns, "namespace", "n", legion.DefaultNamespace, "namespace of the "+string(kind))
	cmd.Flags().Var(&onceFlag{v: &fromFile, why: "a " + string(kind) + " holds one value, not keys"}, "from-file", "read the value from this file (- for standard input)")
	cmd.Flags().StringVar(&fromLiteral, "from-literal", "", "refused: a value is read from a file or standard input")
	cmd.Flags().StringArrayVarP(&labels, "label", "l", nil, "a label key=value (repeatable, or comma-separated)")
	return cmd
}

// readValue reads a value from a file, or standard input for "-", at
// most legion.MaxValueSize bytes.
func readValue(stdin io.Reader, source string) ([]byte, error) {
	r := stdin
	if source != "-" {
		f, err := os.Open(source)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		r = f
	}
	data, err := io.ReadAll(io.LimitReader(r, legion.MaxValueSize+1))
	if err != nil {
		return nil, err
	}
	if len(data) > legion.MaxValueSize {
		return nil, fmt.Errorf("%s: more than %d KiB, the most a value holds", sourceName(source), legion.MaxValueSize>>10)
	}
	return data, nil
}

func sourceName(source string) string {
	if source == "-" {
		return "standard input"
	}
	return source
}
