package daemon

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/legionbsd/legion/internal/buildinfo"
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

// StartResolverProcess makes sure `legion node-resolver` serves the zone
// at listen: one left running by an earlier daemon of this build is kept
// (pods' lookups went on through the restart), one of another build (an
// upgrade) is stopped, and exe starts one in a session of its own, so it
// outlives this process. The resolver stops by itself once the zone file
// is removed.
func StartResolverProcess(ctx context.Context, exe, listen, zone, dataDir string, log *slog.Logger) (string, error) {
	if listen == "" {
		return "", errors.New("node resolver: no address to listen on")
	}
	id := BuildID()
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
		build := resolver.BuildAt(listen)
		if build == id {
			log.Info("node resolver already serving", "listen", listen)
			return listen, nil
		}
		// An upgrade: the resolver left running is of another build,
		// which may not read the zone this one writes. A moment without
		// answers (clients ask again) is the price of replacing it.
		if err := stopResolver(ctx, zone, listen); err != nil {
			log.Warn("a node resolver of another build keeps serving", "listen", listen, "build", cmp.Or(build, "unknown"), "err", err)
			return listen, nil
		}
		log.Info("node resolver of another build stopped", "listen", listen, "build", cmp.Or(build, "unknown"))
	}
	logFile, err := os.OpenFile(filepath.Join(filepath.Dir(zone), "resolver.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return "", err
	}
	defer logFile.Close()
	cmd := exec.Command(exe, "node-resolver", "--listen", listen, "--zone", zone, "--watch", dataDir, "--build", id)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return "", fmt.Errorf("starting the node resolver: %w", err)
	}
	// Reap it if it ends while this process lives; once this process has
	// gone, init does.
	go cmd.Wait()
	if err := untilAnswering(ctx, listen, true, resolverStart); err != nil {
		return "", fmt.Errorf("the node resolver did not answer at %s: %w (see %s)", listen, err, logFile.Name())
	}
	log.Info("node resolver started", "listen", listen, "pid", cmd.Process.Pid)
	return listen, nil
}

// stopResolver stops the resolver serving zone at listen, by the pid it
// wrote beside the zone, and waits until it no longer answers.
func stopResolver(ctx context.Context, zone, listen string) error {
	data, err := os.ReadFile(resolver.PidFile(zone))
	if err != nil {
		return fmt.Errorf("its pid is not known (%w): stop the process whose command line holds node-resolver --listen %s", err, listen)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil || pid <= 1 {
		return fmt.Errorf("%s: %q is no pid", resolver.PidFile(zone), strings.TrimSpace(string(data)))
	}
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		return fmt.Errorf("stopping process %d: %w", pid, err)
	}
	if err := untilAnswering(ctx, listen, false, resolverStop); err != nil {
		return fmt.Errorf("process %d, told to stop, still answers at %s: %w", pid, listen, err)
	}
	return nil
}

// untilAnswering waits until a resolver answers at listen (or, want
// false, no longer does), within d.
func untilAnswering(ctx context.Context, listen string, want bool, d time.Duration) error {
	for deadline := time.Now().Add(d); answers(listen) != want; {
		if time.Now().After(deadline) {
			return fmt.Errorf("not within %s", d)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(resolverPoll):
		}
	}
	return nil
}

// How long a node resolver takes to answer once started, and to stop once
// told; how often that is looked at.
const (
	resolverStart = 10 * time.Second
	resolverStop  = 5 * time.Second
	resolverPoll  = 50 * time.Millisecond
)

// BuildID tells this build from another: the release and commit, and when
// the go command stamped no commit (go run, tests), the executable's size
// and time, which an upgrade in place changes too. The daemon gives it to
// the processes it leaves running (the node resolver), to know later
// whether they are of its build.
func BuildID() string {
	commit := buildinfo.Commit()
	id := buildinfo.Version + " " + commit
	if commit != "unknown" {
		return id
	}
	exe, err := os.Executable()
	if err != nil {
		return id
	}
	fi, err := os.Stat(exe)
	if err != nil {
		return id
	}
	return fmt.Sprintf("%s %d@%d", id, fi.Size(), fi.ModTime().UnixNano())
}
