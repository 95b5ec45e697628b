package main

import (
	"fmt"
	"io"
	"time"

	"github.com/legionbsd/legion"
	"github.com/spf13/cobra"
)

// appliedOutput is -o of apply and create -f, as kubectl's: the objects
// as stored (by name, as JSON or YAML, or through a template) rather than
// a line each saying what was done.
type appliedOutput struct {
	output string
	fm     format
}

func (a *appliedOutput) add(cmd *cobra.Command) {
	cmd.Flags().StringVarP(&a.output, "output", "o", "", "print the objects as stored, as name, json, yaml, go-template=... or jsonpath=... (as legion get -o does), rather than a line each saying what was done")
}

// check reads -o, before anything is written.
func (a *appliedOutput) check(what string) error {
	if a.output == "" {
		return nil
	}
	fm, err := parseOutput(a.output)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	switch fm.name {
	case "table", "wide", "custom-columns":
		return fmt.Errorf("%s -o %s: tables are legion get's; expected name, json, yaml, go-template=... or jsonpath=...", what, a.output)
	}
	a.fm = fm
	return nil
}

// brief says whether the cluster's answer may leave out the objects'
// bodies: nothing but their names is printed.
func (a *appliedOutput) brief() bool { return a.output == "" || a.fm.name == "name" }

// print prints objs as -o asks: one object as itself, several as get
// lists them.
func (a *appliedOutput) print(out, errOut io.Writer, objs []legion.Object) error {
	l := objectListing(objs, false, len(objs) == 1, time.Now())
	return l.print(out, errOut, a.fm)
}
