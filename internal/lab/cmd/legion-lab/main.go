// Command legion-lab runs a Legion cluster of real daemons, each in its
// own network namespace on a bridge of its own, and cuts, heals, delays
// and restarts them on command, for trying by hand what the partition
// tests of internal/lab check. It needs root. Ctrl-C (or quit) removes
// everything it made.
//
//	sudo go run ./internal/lab/cmd/legion-lab -managers 3 -workers 2
//
// It is a separate command rather than a legion subcommand because it
// builds legion from this source tree and is no part of what a cluster
// runs.
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/legionbsd/legion/internal/lab"
)

type stderrLog struct{}

func (stderrLog) Logf(format string, args ...any) { fmt.Fprintf(os.Stderr, format+"\n", args...) }

func main() {
	managers := flag.Int("managers", 3, "managers (the first runs init)")
	workers := flag.Int("workers", 1, "workers")
	binary := flag.String("binary", "", "the legion binary (default: built from this source tree, or $"+lab.BinaryEnv+")")
	images := flag.String("images", "", "comma-separated image archives loaded into every node")
	timing := flag.String("raft-timing", "fast", "the daemons' Raft timing: fast or default")
	flag.Parse()
	opts := lab.Options{Managers: *managers, Workers: *workers, Binary: *binary, RaftTiming: *timing, Log: stderrLog{}}
	if *images != "" {
		opts.Images = strings.Split(*images, ",")
	}
	fmt.Fprintln(os.Stderr, "starting the lab (building legion on first use)...")
	l, err := lab.Open(opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, "legion-lab:", err)
		os.Exit(1)
	}
	defer lab.RemoveBuild()
	defer l.Close()
	printLab(os.Stdout, l)

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(os.Stdin)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	for {
		fmt.Print("lab> ")
		select {
		case <-ctx.Done():
			fmt.Println("\ntearing down")
			return
		case line, ok := <-lines:
			if !ok {
				fmt.Println("tearing down")
				return
			}
			if quit := run(l, strings.Fields(line)); quit {
				fmt.Println("tearing down")
				return
			}
		}
	}
}

func printLab(w io.Writer, l *lab.Lab) {
	fmt.Fprintf(w, "Lab network %s on bridge %s (the host is %s).\n", l.Prefix(), l.Bridge, l.Prefix().Addr().Next())
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tROLE\tADDRESS\tNETNS\tNODE ID")
	for _, n := range l.Nodes {
		role := "worker"
		if n.Manager {
			role = "manager"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", n.Name, role, n.Endpoint(), n.NS, n.ID)
	}
	tw.Flush()
	fmt.Fprintf(w, "\nReach the cluster from this host:\n  export LEGION_SERVER=%s LEGION_CREDENTIALS=%s\n  %s get nodes\n",
		l.Managers()[0].Endpoint(), l.Admin(), l.Binary())
	fmt.Fprintf(w, "or from inside a node: ip netns exec %s %s status --server 127.0.0.1:%d --credentials %s\n",
		l.Nodes[0].NS, l.Binary(), lab.Port, l.Admin())
	fmt.Fprintf(w, "Logs: %s/<name>.log\n\n%s\n", l.Dir, help)
}

const help = `Commands:
  cut NODE, heal NODE            take NODE's link down, bring it up
  isolate NODE PEER...           cut NODE off from the PEERs only (rejoin NODE PEER... undoes it)
  netem NODE DELAY LOSS          delay and drop NODE's packets, e.g. netem w1 200ms 30 (clear NODE undoes it)
  loss NODE PERCENT              drop NODE's packets with iptables, where netem is missing (noloss NODE PERCENT undoes it)
  stop, kill, restart NODE       SIGTERM, SIGKILL, start again
  status                         each manager's Raft state
  nodes                          the lab's nodes
  quit                           tear down (as Ctrl-C does)`

// run does one command line; it reports whether to quit.
func run(l *lab.Lab, f []string) bool {
	if len(f) == 0 {
		return false
	}
	nodes := func(names []string) ([]*lab.Node, error) {
		var out []*lab.Node
		for _, name := range names {
			n := l.Node(name)
			if n == nil {
				return nil, fmt.Errorf("no node %q (the lab has m1.. and w1..)", name)
			}
			out = append(out, n)
		}
		if len(out) == 0 {
			return nil, fmt.Errorf("%s: name a node", f[0])
		}
		return out, nil
	}
	var err error
	switch f[0] {
	case "quit", "exit":
		return true
	case "help":
		fmt.Println(help)
	case "nodes":
		printLab(os.Stdout, l)
	case "status":
		for _, m := range l.Managers() {
			st, err := l.Status(m)
			if err != nil {
				fmt.Printf("%s: %v\n", m.Name, err)
				continue
			}
			fmt.Printf("%s: %s, term %d, leader %s, applied %d\n", m.Name, st.State, st.Term, st.LeaderAddress, st.AppliedIndex)
		}
	case "cut", "heal", "stop", "kill", "restart", "clear":
		var ns []*lab.Node
		if ns, err = nodes(f[1:]); err != nil {
			break
		}
		for _, n := range ns {
			switch f[0] {
			case "cut":
				err = l.Cut(n)
			case "heal":
				err = l.Heal(n)
			case "stop":
				err = l.Stop(n)
			case "kill":
				err = l.Kill(n)
			case "restart":
				err = l.Restart(n)
			case "clear":
				err = l.ClearNetem(n)
			}
		}
	case "isolate", "rejoin":
		var ns []*lab.Node
		if ns, err = nodes(f[1:]); err != nil {
			break
		}
		if len(ns) < 2 {
			err = fmt.Errorf("%s NODE PEER...: name the peers too", f[0])
			break
		}
		if f[0] == "isolate" {
			err = l.Isolate(ns[0], ns[1:]...)
		} else {
			err = l.Rejoin(ns[0], ns[1:]...)
		}
	case "netem":
		if len(f) != 4 {
			err = fmt.Errorf("netem NODE DELAY LOSS%%, e.g. netem w1 200ms 30")
			break
		}
		var ns []*lab.Node
		if ns, err = nodes(f[1:2]); err != nil {
			break
		}
		var d time.Duration
		var loss float64
		if d, err = time.ParseDuration(f[2]); err != nil {
			break
		}
		if loss, err = strconv.ParseFloat(strings.TrimSuffix(f[3], "%"), 64); err != nil {
			break
		}
		err = l.Netem(ns[0], d, loss)
	case "loss", "noloss":
		if len(f) != 3 {
			err = fmt.Errorf("%s NODE PERCENT, e.g. %s w1 30", f[0], f[0])
			break
		}
		var ns []*lab.Node
		if ns, err = nodes(f[1:2]); err != nil {
			break
		}
		var pct float64
		if pct, err = strconv.ParseFloat(strings.TrimSuffix(f[2], "%"), 64); err != nil {
			break
		}
		if f[0] == "loss" {
			err = l.Loss(ns[0], pct)
		} else {
			err = l.ClearLoss(ns[0], pct)
		}
	default:
		err = fmt.Errorf("unknown command %q; help lists them", f[0])
	}
	if err != nil {
		fmt.Println("error:", err)
	}
	return false
}
