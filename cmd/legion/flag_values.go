package main

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Flag values of their own: what a plain flag of Go's kinds would take
// wrongly (kubectl's spellings, a second value kept in place of the
// first).

// dryRunFlag is apply's --dry-run, which the cluster checks as it would
// an apply: kubectl's --dry-run=server. Its values are read too (server,
// none), and client is refused naming what does that here.
type dryRunFlag bool

func (d *dryRunFlag) String() string { return strconv.FormatBool(bool(*d)) }
func (d *dryRunFlag) Type() string   { return "" }

func (d *dryRunFlag) Set(v string) error {
	switch strings.ToLower(v) {
	case "true", "server":
		*d = true
	case "false", "none":
		*d = false
	case "client":
		return errors.New("client: a dry run here always has the cluster check what it would do, changing nothing (kubectl's server): give --dry-run or --dry-run=server; legion validate -f checks manifests without the cluster")
	default:
		return fmt.Errorf("%q: expected server (the same as --dry-run alone) or none", v)
	}
	return nil
}

// onceFlag is a string flag that may be given once: a second value is
// refused rather than kept in place of the first, as a plain string flag
// does, where a user may mean both (kubectl's create deployment takes
// --image twice for two containers, its create secret --from-file for
// two keys).
type onceFlag struct {
	v   *string
	set bool
	why string // what a second value would mean, and why it is not taken
}

func (f *onceFlag) String() string {
	if f.v == nil {
		return ""
	}
	return *f.v
}
func (f *onceFlag) Type() string { return "string" }

func (f *onceFlag) Set(v string) error {
	if f.set {
		return fmt.Errorf("given twice (%s, then %s): %s", *f.v, v, f.why)
	}
	*f.v, f.set = v, true
	return nil
}

// kubectlFlag is one of kubectl's flags of commands that read manifests:
// a value Legion does anyway is taken (ok), any other refused saying what
// is so here (VALUE in why stands for the value given). bool makes it a
// flag that may be given alone.
type kubectlFlag struct {
	ok   func(v string) bool
	why  string
	bool bool
}

func (f *kubectlFlag) String() string { return "" }
func (f *kubectlFlag) Type() string {
	if f.bool {
		return "bool"
	}
	return "string"
}
func (f *kubectlFlag) IsBoolFlag() bool { return f.bool }

func (f *kubectlFlag) Set(v string) error {
	if f.ok != nil && f.ok(v) {
		return nil
	}
	return errors.New(strings.ReplaceAll(f.why, "VALUE", v))
}

func always(string) bool { return true }
func isTrue(v string) bool {
	b, err := strconv.ParseBool(v)
	return err == nil && b
}
