package image

import (
	"context"

	"github.com/legionbsd/legion/sys"
)

// FileFlags changes BSD file flags (chflags(1)). On FreeBSD a file marked
// schg or sunlnk refuses removal, so whiteouts and replaced files clear
// them first; layers written by bsdtar carry flags to set again.
// Elsewhere there are none, and the store runs without a FileFlags.
type FileFlags interface {
	// Clear removes the flags that refuse changes from path, and from
	// everything below it when dir is true; links are not followed.
	Clear(ctx context.Context, path string, dir bool) error
	// Set sets flags (chflags keywords, comma-separated, as bsdtar
	// records them) on path itself.
	Set(ctx context.Context, path, flags string) error
}

// clearable are the flags that make a file refuse removal or change.
const clearable = "noschg,nouchg,nosappnd,nouappnd,nosunlnk,nouunlnk"

// RunnerFlags changes flags with chflags(1) through the system runner.
type RunnerFlags struct {
	Runner sys.Runner
}

// Clear runs chflags -R (a directory; -R walks without following links)
// or chflags -h (anything else; the link itself, never its target).
func (f RunnerFlags) Clear(ctx context.Context, path string, dir bool) error {
	opt := "-h"
	if dir {
		opt = "-R"
	}
	_, err := sys.Run(ctx, f.Runner, "chflags", opt, clearable, path)
	return err
}

// Set runs chflags -h FLAGS PATH.
func (f RunnerFlags) Set(ctx context.Context, path, flags string) error {
	_, err := sys.Run(ctx, f.Runner, "chflags", "-h", flags, path)
	return err
}
