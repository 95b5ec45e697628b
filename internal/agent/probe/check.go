package probe

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/legionbsd/legion"
)

// Execer runs a command in the container and returns its exit code; the
// agent backs it with the runtime's Exec.
type Execer interface {
	Exec(ctx context.Context, cmd []string) (exitCode int, err error)
}

// checker runs one check; nil means it passed. ctx carries the timeout.
type checker interface {
	check(ctx context.Context) error
}

type tcpCheck struct{ addr string }

func (c tcpCheck) check(ctx context.Context) error {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", c.addr)
	if err != nil {
		return fmt.Errorf("tcp %s: %w", c.addr, err)
	}
	return conn.Close()
}

type httpCheck struct {
	url     string
	headers []legion.HTTPHeader
	client  *http.Client
}

func newHTTPCheck(scheme, addr, path string, headers []legion.HTTPHeader) httpCheck {
	if scheme == "" {
		scheme = "http"
	}
	if path == "" {
		path = "/"
	}
	tr := &http.Transport{
		// Probes check that the server answers, not who it is.
		TLSClientConfig:   &tls.Config{InsecureSkipVerify: true},
		DisableKeepAlives: true,
		Proxy:             nil,
	}
	client := &http.Client{
		Transport: tr,
		// A redirect is an answer: 3xx passes as it is.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	return httpCheck{url: strings.ToLower(scheme) + "://" + addr + path, headers: headers, client: client}
}

func (c httpCheck) check(ctx context.Context) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.url, nil)
	if err != nil {
		return fmt.Errorf("http %s: %w", c.url, err)
	}
	req.Header.Set("User-Agent", "legion-probe")
	for _, h := range c.headers {
		if strings.EqualFold(h.Name, "Host") {
			req.Host = h.Value
			continue
		}
		req.Header.Add(h.Name, h.Value)
	}
	resp, err := c.client.Do(req)
	if err != nil {
		return fmt.Errorf("http %s: %w", c.url, err)
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 399 {
		return fmt.Errorf("http %s: status %d, expected 2xx or 3xx", c.url, resp.StatusCode)
	}
	return nil
}

type grpcCheck struct {
	addr    string
	service string
}

func (c grpcCheck) check(ctx context.Context) error {
	// passthrough: the address is an IP and port, never a name to look up.
	conn, err := grpc.NewClient("passthrough:///"+c.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return fmt.Errorf("grpc %s: %w", c.addr, err)
	}
	defer conn.Close()
	resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: c.service})
	if err != nil {
		return fmt.Errorf("grpc health %s service %q: %w", c.addr, c.service, err)
	}
	if s := resp.GetStatus(); s != healthpb.HealthCheckResponse_SERVING {
		return fmt.Errorf("grpc health %s service %q: %s, expected SERVING", c.addr, c.service, s)
	}
	return nil
}

type execCheck struct {
	execer Execer
	cmd    []string
}

func (c execCheck) check(ctx context.Context) error {
	code, err := c.execer.Exec(ctx, c.cmd)
	if err != nil {
		return fmt.Errorf("exec %q: %w", c.cmd, err)
	}
	if code != 0 {
		return fmt.Errorf("exec %q: exit code %d, expected 0", c.cmd, code)
	}
	return nil
}

// resolvePort turns a probe's port into a number: a name must be one of
// the pod's container ports; a number is taken as it is (a probe may
// target a port the spec does not list).
func resolvePort(pod *legion.PodSpec, ref legion.PortRef) (int, error) {
	if ref.Name != "" {
		if pod == nil {
			return 0, fmt.Errorf("port %q: no pod spec to resolve the name in", ref.Name)
		}
		cp, ok := pod.FindPort(ref)
		if !ok {
			return 0, fmt.Errorf("port %q: no container port of the pod has that name", ref.Name)
		}
		return cp.ContainerPort, nil
	}
	if ref.Number < 1 || ref.Number > 65535 {
		return 0, fmt.Errorf("port %d: expected 1 to 65535 or a port name", ref.Number)
	}
	return ref.Number, nil
}

// newChecker makes the check a probe describes against host.
func newChecker(p *legion.Probe, pod *legion.PodSpec, host string, ex Execer) (checker, error) {
	addr := func(ref legion.PortRef) (string, error) {
		if host == "" {
			return "", errors.New("no target address for a network probe")
		}
		n, err := resolvePort(pod, ref)
		if err != nil {
			return "", err
		}
		return net.JoinHostPort(host, strconv.Itoa(n)), nil
	}
	switch {
	case p.TCP != nil:
		a, err := addr(p.TCP.Port)
		if err != nil {
			return nil, fmt.Errorf("tcp: %w", err)
		}
		return tcpCheck{addr: a}, nil
	case p.HTTP != nil:
		a, err := addr(p.HTTP.Port)
		if err != nil {
			return nil, fmt.Errorf("http: %w", err)
		}
		switch strings.ToLower(p.HTTP.Scheme) {
		case "", "http", "https":
		default:
			return nil, fmt.Errorf("http: scheme %q: expected http or https", p.HTTP.Scheme)
		}
		return newHTTPCheck(p.HTTP.Scheme, a, p.HTTP.Path, p.HTTP.Headers), nil
	case p.GRPC != nil:
		a, err := addr(p.GRPC.Port)
		if err != nil {
			return nil, fmt.Errorf("grpc: %w", err)
		}
		return grpcCheck{addr: a, service: p.GRPC.Service}, nil
	case p.Exec != nil:
		if len(p.Exec.Command) == 0 {
			return nil, errors.New("exec: command: missing")
		}
		if ex == nil {
			return nil, errors.New("exec: no Execer to run the command in the container")
		}
		return execCheck{execer: ex, cmd: p.Exec.Command}, nil
	}
	return nil, errors.New("expected one of tcp, http, grpc or exec")
}
