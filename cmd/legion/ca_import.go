package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/legionbsd/legion/cluster/pki"
	"github.com/spf13/pflag"
)

// caFiles are --ca-cert and --ca-key of legion init and legion ca rotate:
// a CA of the operator's own PKI for the cluster to take as its root.
type caFiles struct{ cert, key string }

// addFlags adds the flags; purpose says what the CA is for.
func (f *caFiles) addFlags(fs *pflag.FlagSet, purpose string) {
	fs.StringVar(&f.cert, "ca-cert", "", "the certificate (PEM) of a CA of your own "+purpose+", with --ca-key (default: a new CA); an intermediate CA is trusted as the cluster's root")
	fs.StringVar(&f.key, "ca-key", "", "the private key of --ca-cert's CA (PEM, unencrypted ECDSA P-256, P-384 or P-521)")
}

// read reads the two files and checks them as the daemon will
// (pki.ImportCA), naming the flag at fault; nil, nil when neither flag
// is given.
func (f *caFiles) read(now time.Time) (certPEM, keyPEM []byte, err error) {
	switch {
	case f.cert == "" && f.key == "":
		return nil, nil, nil
	case f.key == "":
		return nil, nil, errors.New("--ca-cert needs --ca-key: expected both (the CA's certificate and its private key, PEM) or neither")
	case f.cert == "":
		return nil, nil, errors.New("--ca-key needs --ca-cert: expected both (the CA's certificate and its private key, PEM) or neither")
	}
	if certPEM, err = os.ReadFile(f.cert); err != nil {
		return nil, nil, fmt.Errorf("--ca-cert: %w", err)
	}
	if keyPEM, err = os.ReadFile(f.key); err != nil {
		return nil, nil, fmt.Errorf("--ca-key: %w", err)
	}
	if _, err := pki.ImportCA(certPEM, keyPEM, now); err != nil {
		var ie *pki.ImportError
		if !errors.As(err, &ie) {
			return nil, nil, err
		}
		if ie.Key {
			return nil, nil, fmt.Errorf("--ca-key %s: %w", f.key, ie.Err)
		}
		return nil, nil, fmt.Errorf("--ca-cert %s: %w", f.cert, ie.Err)
	}
	return certPEM, keyPEM, nil
}

// checkTaken checks that the cluster init made has the CA given for its
// root, by the admin credentials init wrote: a daemon of a build from
// before --ca-cert ignores it and makes a CA of its own.
func (f *caFiles) checkTaken(warn io.Writer, certPEM []byte, admin string) error {
	given, err := pki.ParseCert(certPEM)
	if err != nil {
		return err
	}
	creds, err := pki.LoadBundle(admin)
	if err != nil {
		fmt.Fprintf(warn, "warning: whether the cluster's root is the CA of --ca-cert could not be checked (%v)\n", err)
		return nil
	}
	if got := pki.Digest(creds.Authority()); got != pki.Digest(given) {
		return fmt.Errorf("the daemon made a CA of its own (%s), not the one of --ca-cert %s (%s): it is of a build from before --ca-cert; "+
			"the cluster is initialised under its own CA: rotate to yours with legion ca rotate --ca-cert once the daemon is upgraded", got, f.cert, pki.Digest(given))
	}
	return nil
}
