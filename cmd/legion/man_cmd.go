package main

import (
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"
)

// manSection is where Legion's pages go: section 1, as kubectl's and
// docker's do, since most commands are a user's, not only root's.
const manSection = "1"

// newGenManCommand writes a man page for every command. The port and the
// release script run it at build time, so the pages always say what this
// build's commands do. Hidden: it is a build step, not an operator's
// command.
func newGenManCommand() *cobra.Command {
	return &cobra.Command{
		Use:    "gen-man DIR",
		Short:  "Write a man page for every command into DIR",
		Hidden: true,
		Args:   cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := os.MkdirAll(args[0], 0o755); err != nil {
				return err
			}
			date, err := manDate()
			if err != nil {
				return err
			}
			return doc.GenManTree(cmd.Root(), &doc.GenManHeader{
				Title: "LEGION", Section: manSection, Source: "Legion " + version, Manual: "Legion Manual", Date: &date,
			}, args[0])
		},
	}
}

// manDate is the pages' date: SOURCE_DATE_EPOCH when set (reproducible
// builds, as the ports tree sets it), otherwise today.
func manDate() (time.Time, error) {
	s := os.Getenv("SOURCE_DATE_EPOCH")
	if s == "" {
		return time.Now().UTC(), nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("SOURCE_DATE_EPOCH %q: want seconds since 1970", s)
	}
	return time.Unix(n, 0).UTC(), nil
}
