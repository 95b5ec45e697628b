package main

import (
	"fmt"

	"github.com/legionbsd/legion/cluster/store"
	"github.com/spf13/pflag"
)

// raftTimingFlag adds the hidden --raft-timing flag: "fast" gives a
// daemon the short Raft timing tests use (store.FastTiming), so a lab of
// real daemons (internal/lab) elects within about a second instead of
// the production five. It is hidden because a production cluster on that
// timing would hold elections on every slow disk write.
func raftTimingFlag(fs *pflag.FlagSet) *string {
	v := fs.String("raft-timing", "default", "Raft timing: default, or fast (labs and tests only)")
	fs.MarkHidden("raft-timing")
	return v
}

// raftTiming is the store.Timing a --raft-timing value names; the zero
// Timing lets the store pick its production default.
func raftTiming(name string) (store.Timing, error) {
	switch name {
	case "", "default":
		return store.Timing{}, nil
	case "fast":
		return store.FastTiming(), nil
	}
	return store.Timing{}, fmt.Errorf("--raft-timing %q: want default or fast", name)
}
