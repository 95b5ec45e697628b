package main

import (
	"github.com/legionbsd/legion/internal/daemon"
	"github.com/spf13/pflag"
)

// metricsFlag is --metrics-listen, shared by daemon and up.
func metricsFlag(fs *pflag.FlagSet, o *daemon.Options) {
	fs.StringVar(&o.MetricsListen, "metrics-listen", "",
		"serve Prometheus metrics at http://ADDR/metrics, unauthenticated: an admin network's address (off when empty)")
}
