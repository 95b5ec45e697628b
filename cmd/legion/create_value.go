package main

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/netbsd/ingress"
	"github.com/spf13/cobra"
)

// createValueCommand is legion create secret and create config: one value
// from a file or standard input, as docker secret create and docker
// config create take it. A Legion Secret or Config holds one value, where
// a Kubernetes one holds a map, so kubectl's --from-literal KEY=VALUE has
// no meaning here and is refused, saying so. kubectl's forms that do have
// one are taken: create secret generic NAME --from-file FILE, and create
// secret tls NAME --cert FILE --key FILE, which makes the one PEM of
// chain and key a Route's TLS names, checked as the ingress reads it.
func createValueCommand(c *clusterCLI, kind legion.Kind) *cobra.Command {
	noun := strings.ToLower(string(kind))
	var ns, fromFile, fromLiteral, certFile, keyFile string
	var labels []string
	var out createOutput
	var aliases []string
	if kind == legion.KindConfig {
		aliases = []string{"configmap", "cm"} // kubectl's: a ConfigMap is a Config here
	}
	cmd := &cobra.Command{
		Use:     noun + " NAME [FILE|-]",
		Aliases: aliases,
		Short:   "Make a " + string(kind) + " of one value, read from FILE or standard input (-), as docker " + noun + " create does",
		Long: `Create ` + noun + ` makes a ` + string(kind) + ` named NAME whose value is FILE's content
(or standard input's, for - or --from-file -), at most 500 KiB. One already
there is refused, not replaced: legion apply or legion edit change it. Its
value is never taken from the command line, where the shell's history
would keep it.` + secretTLSHelp(kind),
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			what := "create " + noun
			if fromLiteral != "" {
				return fmt.Errorf("%s: --from-literal: a %s holds one value, not keys, and a value on the command line stays in the shell's history: give it as a file (legion create %s NAME FILE) or on standard input (legion create %s NAME -)", what, kind, noun, noun)
			}
			if len(args) == 2 && args[0] == "generic" && kind == legion.KindSecret && (fromFile != "" || !exists(args[1])) {
				// kubectl's type word: generic is the only kind of Secret
				// here, so the name follows it.
				args = args[1:]
			}
			var data []byte
			var leaf *x509.Certificate
			var err error
			if certFile != "" || keyFile != "" {
				if len(args) == 2 && args[0] == "tls" {
					args = args[1:]
				}
				if len(args) != 1 || fromFile != "" {
					return fmt.Errorf("%s: --cert and --key make the Secret's value: give NAME alone, not FILE or --from-file", what)
				}
				if data, leaf, err = tlsPair(certFile, keyFile); err != nil {
					return fmt.Errorf("%s: %w", what, err)
				}
			} else {
				if args[0] == "tls" && len(args) == 2 && kind == legion.KindSecret && !exists(args[1]) {
					return fmt.Errorf("%s tls %s: give the certificate and key files as --cert FILE --key FILE", what, args[1])
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
				if data, err = readValue(cmd.InOrStdin(), source); err != nil {
					if key, file, ok := strings.Cut(source, "="); ok && errors.Is(err, os.ErrNotExist) {
						return fmt.Errorf("%s: --from-file %s: a %s holds one value, not keys, so it takes no KEY=: give --from-file %s (%q is the key kubectl would name)", what, source, kind, file, key)
					}
					return fmt.Errorf("%s: %w", what, err)
				}
			}
			name := args[0]
			if err := legion.ValidName(name); err != nil {
				return fmt.Errorf("%s: name %q: %w", what, name, err)
			}
			lbls, err := keyValues("--label", labels)
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
			note := fmt.Sprintf(" (%d bytes)", len(data))
			if leaf != nil {
				note = fmt.Sprintf(" (%d bytes: certificate chain and key for %s, valid until %s)", len(data), certNames(leaf), leaf.NotAfter.UTC().Format(time.DateOnly))
			}
			cl, _, err := out.create(cmd, c, what, o, false, note)
			if cl != nil {
				cl.Close()
			}
			return err
		},
	}
	cmd.Flags().StringVarP(&ns, "namespace", "n", legion.DefaultNamespace, "namespace of the "+string(kind))
	cmd.Flags().Var(&onceFlag{v: &fromFile, why: "a " + string(kind) + " holds one value, not keys"}, "from-file", "read the value from this file (- for standard input)")
	cmd.Flags().StringVar(&fromLiteral, "from-literal", "", "refused: a value is read from a file or standard input")
	cmd.Flags().StringArrayVarP(&labels, "label", "l", nil, "a label key=value (repeatable, or comma-separated)")
	out.add(cmd.Flags(), noun)
	if kind == legion.KindSecret {
		cmd.Flags().Var(&onceFlag{v: &certFile, why: "the chain is one file, leaf first"}, "cert", "with --key: the certificate chain's PEM file (leaf first), for a Route's TLS")
		cmd.Flags().Var(&onceFlag{v: &keyFile, why: "a certificate has one key"}, "key", "with --cert: the private key's PEM file")
	}
	return cmd
}

func secretTLSHelp(kind legion.Kind) string {
	if kind != legion.KindSecret {
		return ""
	}
	return `

With --cert and --key (kubectl's create secret tls NAME, the word tls
optional), the value is the certificate chain followed by the key, one
PEM as a Route's tls.secret takes it; the pair is checked first: the
files must hold a chain and one private key that matches its leaf.`
}

// tlsPair reads a certificate chain and its private key and returns them
// as one PEM, the chain first, once the ingress would accept it, with the
// leaf certificate.
func tlsPair(certFile, keyFile string) ([]byte, *x509.Certificate, error) {
	if certFile == "" || keyFile == "" {
		return nil, nil, errors.New("--cert and --key go together: the certificate chain's file and its private key's")
	}
	certPEM, err := readValue(nil, certFile)
	if err != nil {
		return nil, nil, fmt.Errorf("--cert: %w", err)
	}
	keyPEM, err := readValue(nil, keyFile)
	if err != nil {
		return nil, nil, fmt.Errorf("--key: %w", err)
	}
	// Each file is read for its own kind first, so that a key given as
	// --cert is named as such rather than found in the joined PEM.
	if _, err := tls.X509KeyPair(certPEM, keyPEM); err != nil {
		return nil, nil, fmt.Errorf("--cert %s --key %s: %w", certFile, keyFile, err)
	}
	data := append(append(bytes.TrimRight(certPEM, "\n"), '\n'), keyPEM...)
	if len(data) > legion.MaxValueSize {
		return nil, nil, fmt.Errorf("--cert and --key: %d bytes together, more than %d KiB, the most a value holds", len(data), legion.MaxValueSize>>10)
	}
	pair, err := ingress.ParseCertificate(data)
	if err != nil {
		return nil, nil, fmt.Errorf("--cert %s --key %s: %w", certFile, keyFile, err)
	}
	return data, pair.Leaf, nil
}

// certNames is what a certificate is for: its DNS names and addresses, or
// its subject's common name when it has neither.
func certNames(c *x509.Certificate) string {
	names := slices.Clone(c.DNSNames)
	for _, ip := range c.IPAddresses {
		names = append(names, ip.String())
	}
	if len(names) == 0 {
		return c.Subject.CommonName
	}
	return strings.Join(names, ", ")
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
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
