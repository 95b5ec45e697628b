package main

import (
	"github.com/legionbsd/legion/netbsd/addrplan"
	"github.com/spf13/pflag"
)

// dnsListenHelp says where the node resolver answers unless told.
const dnsListenHelp = "address of the node resolver (default: the gateway of the node's pod /24, " +
	"in 127/8 on the process platform, port 53 when this process may bind it, else a free port there; none: no resolver)"

// rangeFlags are init's (and up's) choice of the cluster's ranges.
func rangeFlags(fs *pflag.FlagSet, pod, service *string) {
	fs.StringVar(pod, "pod-cidr", "", "the cluster's pod range, an IPv4 /16 (each node takes a /24 of it); "+
		"default: a /16 no other cluster of this host uses on the process platform, 10.200.0.0/16 on jails")
	fs.StringVar(service, "service-cidr", "", "the cluster's service (VIP) range, an IPv4 /16; "+
		"default: the /16 after the chosen pod range on the process platform, 10.201.0.0/16 on jails")
}

// checkRangeFlags refuses ranges the plan cannot use before anything
// is started.
func checkRangeFlags(pod, service string) error {
	if pod != "" {
		if _, err := addrplan.ParseRange("--pod-cidr", pod); err != nil {
			return err
		}
	}
	if service != "" {
		if _, err := addrplan.ParseRange("--service-cidr", service); err != nil {
			return err
		}
	}
	return nil
}
