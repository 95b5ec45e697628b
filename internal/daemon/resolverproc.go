package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/legionbsd/legion/netbsd/resolver"
	"github.com/miekg/dns"
)

// answers reports whether a resolver serving the cluster's zone answers
// at addr.
func answers(addr string) bool {
	c := &dns.Client{Net: "udp", Timeout: 300 * time.Millisecond}
	m := new(dns.Msg)
	m.SetQuestion(resolver.Domain, dns.TypeSOA)
	r, _, err := c.Exchange(m, addr)
	return err == nil && r.Authoritative
}

// startResolverProcess makes sure `legion node-resolver` serves the zone
// at listen: one left running by an earlier daemon is kept (pods' lookups
// went on through the restart), otherwise exe starts one in a session of
// its own, so it outlives this process. The resolver stops by itself once
// the zone file is removed.
func startResolverProcess(ctx context.Context, exe, listen, zone, dataDir string, log *slog.Logger) (string, error) {
	if listen == "" {
		return "", errors.New("node resolver: no address to listen on")
	}
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return "", fmt.Errorf("node resolver: %w", err)
	}
	if port == "0" {
		// A process of its own needs a port chosen beforehand.
		pc, l, err := resolver.Listen(net.JoinHostPort(host, "0"))
		if err != nil {
			return "", fmt.Errorf("node resolver: %w", err)
		}
		listen = pc.LocalAddr().String()
		pc.Close()
		l.Close()
	} else if answers(listen) {
		log.Info("node resolver already serving", "listen", listen)
		return listen, nil
	}
	logFile, err := os.OpenFile(filepath.Join(filepath.Dir(zone), "resolver.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return "", err
	}
	defer logFile.Close()
	cmd := exec.Command(exe, "node-resolver", "--listen", listen, "--zone", zone, "--watch", dataDir)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return "", fmt.Errorf("starting the node resolver: %w", err)
	}
	// Reap it if it ends while this process lives; once this process has
	// gone, init does.
	go cmd.Wait()
	for deadline := time.Now().Add(10 * time.Second); !answers(listen); {
		if time.Now().After(deadline) {
			return "", fmt.Errorf("the node resolver did not answer at %s within 10 s (see %s)", listen, logFile.Name())
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	log.Info("node resolver started", "listen", listen, "pid", cmd.Process.Pid)
	return listen, nil
}
