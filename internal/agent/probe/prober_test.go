package probe_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/internal/agent/probe"
	"github.com/legionbsd/legion/internal/testpoll"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const fast = legion.Duration(20 * time.Millisecond)

// run starts a prober on cfg and returns its results as they come; the
// prober stops when the test ends.
func run(t *testing.T, cfg probe.Config) (<-chan probe.Result, <-chan struct{}) {
	t.Helper()
	results := make(chan probe.Result, 100)
	report := cfg.Report
	cfg.Report = func(r probe.Result) {
		if report != nil {
			report(r)
		}
		results <- r
	}
	p, err := probe.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		p.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return results, done
}

// next waits for the next result.
func next(t *testing.T, ch <-chan probe.Result) probe.Result {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(10 * time.Second):
		t.Fatal("no probe result within 10s")
		return probe.Result{}
	}
}

func expect(t *testing.T, ch <-chan probe.Result, kind probe.Kind, passing bool) probe.Result {
	t.Helper()
	r := next(t, ch)
	if r.Kind != kind || r.Passing != passing {
		t.Fatalf("result %+v, want %s passing=%v", r, kind, passing)
	}
	return r
}

func fastProbe(p legion.Probe) *legion.Probe {
	p.Period, p.Timeout = fast, legion.Duration(time.Second)
	if p.FailureThreshold == 0 {
		p.FailureThreshold = 1
	}
	return &p
}

// waitFor polls cond every 5 ms until it holds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testpoll.Until(t, what, 10*time.Second, 5*time.Millisecond, cond)
}

func TestTCPReadinessByNamedPort(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	pod := &legion.PodSpec{Containers: []legion.Container{{Name: "web", Ports: []legion.ContainerPort{{Name: "web", ContainerPort: port}}}}}
	results, _ := run(t, probe.Config{Pod: pod, Host: "127.0.0.1",
		Probes: legion.Probes{Readiness: fastProbe(legion.Probe{TCP: &legion.TCPProbe{Port: legion.PortRef{Name: "web"}}})}})
	expect(t, results, probe.Readiness, true)
	ln.Close()
	r := expect(t, results, probe.Readiness, false)
	if !strings.Contains(r.Reason, "tcp 127.0.0.1:"+strconv.Itoa(port)) {
		t.Fatalf("reason %q: want the address", r.Reason)
	}
}

func hostPort(t *testing.T, url string) (string, int) {
	t.Helper()
	u := strings.TrimPrefix(strings.TrimPrefix(url, "http://"), "https://")
	h, p, err := net.SplitHostPort(u)
	if err != nil {
		t.Fatal(err)
	}
	n, _ := strconv.Atoi(p)
	return h, n
}

func TestHTTPStatuses(t *testing.T) {
	mux := http.NewServeMux()
	for _, code := range []int{200, 204, 301, 302, 399, 400, 404, 500, 503} {
		mux.HandleFunc("/"+strconv.Itoa(code), func(w http.ResponseWriter, r *http.Request) {
			if code >= 300 && code < 400 {
				w.Header().Set("Location", "/500") // never followed
			}
			w.WriteHeader(code)
		})
	}
	srv := httptest.NewServer(mux)
	defer srv.Close()
	host, port := hostPort(t, srv.URL)
	for _, tc := range []struct {
		code int
		pass bool
	}{{200, true}, {204, true}, {301, true}, {302, true}, {399, true}, {400, false}, {404, false}, {500, false}, {503, false}} {
		t.Run(strconv.Itoa(tc.code), func(t *testing.T) {
			p := fastProbe(legion.Probe{HTTP: &legion.HTTPProbe{Path: "/" + strconv.Itoa(tc.code), Port: legion.PortRef{Number: port}}})
			// Readiness starts off, so a pass is its transition; liveness
			// starts on, so a failure is.
			probes := legion.Probes{Readiness: p}
			kind := probe.Readiness
			if !tc.pass {
				probes, kind = legion.Probes{Liveness: p}, probe.Liveness
			}
			results, _ := run(t, probe.Config{Host: host, Probes: probes})
			r := next(t, results)
			if r.Kind == probe.Readiness && !tc.pass {
				r = next(t, results) // no readiness probe: ready once started
			}
			if r.Kind != kind || r.Passing != tc.pass {
				t.Fatalf("status %d: %+v, want %s passing=%v", tc.code, r, kind, tc.pass)
			}
			if !tc.pass && !strings.Contains(r.Reason, "status "+strconv.Itoa(tc.code)) {
				t.Fatalf("reason %q: want the status", r.Reason)
			}
		})
	}
}

func TestHTTPHeadersAndHTTPS(t *testing.T) {
	var mu sync.Mutex
	var got []string
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.URL.Path+" host="+r.Host+" x="+r.Header.Get("X-Probe"))
		mu.Unlock()
	}))
	defer srv.Close()
	host, port := hostPort(t, srv.URL)
	results, _ := run(t, probe.Config{Host: host, Probes: legion.Probes{Readiness: fastProbe(legion.Probe{HTTP: &legion.HTTPProbe{
		Path: "/healthz", Port: legion.PortRef{Number: port}, Scheme: "https",
		Headers: []legion.HTTPHeader{{Name: "X-Probe", Value: "yes"}, {Name: "Host", Value: "web.example"}},
	}})}})
	expect(t, results, probe.Readiness, true)
	mu.Lock()
	defer mu.Unlock()
	if d := cmp.Diff("/healthz host=web.example x=yes", got[0]); d != "" {
		t.Fatalf("request (-want +got):\n%s", d)
	}
}

func TestHTTPTimeout(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done() // never answers in time
	}))
	defer srv.Close()
	host, port := hostPort(t, srv.URL)
	p := fastProbe(legion.Probe{HTTP: &legion.HTTPProbe{Path: "/", Port: legion.PortRef{Number: port}}})
	p.Timeout = legion.Duration(50 * time.Millisecond)
	results, _ := run(t, probe.Config{Host: host, Probes: legion.Probes{Liveness: p}})
	expect(t, results, probe.Readiness, true)
	r := expect(t, results, probe.Liveness, false)
	if !strings.Contains(r.Reason, "timeout 50ms") {
		t.Fatalf("reason %q: want the timeout", r.Reason)
	}
}

func TestGRPCHealth(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := health.NewServer()
	hs.SetServingStatus("legion.Web", healthpb.HealthCheckResponse_NOT_SERVING)
	gs := grpc.NewServer()
	healthpb.RegisterHealthServer(gs, hs)
	go gs.Serve(ln)
	defer gs.Stop()
	port := ln.Addr().(*net.TCPAddr).Port

	var mu sync.Mutex
	checks := 0
	p := fastProbe(legion.Probe{GRPC: &legion.GRPCProbe{Port: legion.PortRef{Number: port}, Service: "legion.Web"}})
	p.FailureThreshold = 2
	results, _ := run(t, probe.Config{Host: "127.0.0.1", Probes: legion.Probes{Readiness: p},
		Report: func(probe.Result) { mu.Lock(); checks++; mu.Unlock() }})
	hs.SetServingStatus("legion.Web", healthpb.HealthCheckResponse_SERVING)
	expect(t, results, probe.Readiness, true)
	hs.SetServingStatus("legion.Web", healthpb.HealthCheckResponse_NOT_SERVING)
	r := expect(t, results, probe.Readiness, false)
	if !strings.Contains(r.Reason, "NOT_SERVING") {
		t.Fatalf("reason %q: want the status", r.Reason)
	}
	// An unknown service fails too.
	p2 := fastProbe(legion.Probe{GRPC: &legion.GRPCProbe{Port: legion.PortRef{Number: port}, Service: "nope"}})
	results2, _ := run(t, probe.Config{Host: "127.0.0.1", Probes: legion.Probes{Liveness: p2}})
	expect(t, results2, probe.Readiness, true)
	if r := expect(t, results2, probe.Liveness, false); !strings.Contains(r.Reason, "NotFound") {
		t.Fatalf("unknown service: reason %q", r.Reason)
	}
}

// scripted is an Execer whose commands answer by call number.
type scripted struct {
	mu     sync.Mutex
	calls  map[string]int
	at     map[string][]time.Time
	answer func(cmd string, call int) int
}

func newScripted(answer func(cmd string, call int) int) *scripted {
	return &scripted{calls: map[string]int{}, at: map[string][]time.Time{}, answer: answer}
}

func (s *scripted) Exec(ctx context.Context, cmd []string) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls[cmd[0]]++
	s.at[cmd[0]] = append(s.at[cmd[0]], time.Now())
	return s.answer(cmd[0], s.calls[cmd[0]]), nil
}

func (s *scripted) count(cmd string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[cmd]
}

func execProbe(cmd string, failTh, succTh int) *legion.Probe {
	return fastProbe(legion.Probe{Exec: &legion.ExecProbe{Command: []string{cmd}}, FailureThreshold: failTh, SuccessThreshold: succTh})
}

func TestExecThresholdsReportTransitionsOnly(t *testing.T) {
	// Readiness: calls 1-3 pass, 4 fails, 5 passes, 6-7 fail, 8 on pass.
	ex := newScripted(func(_ string, call int) int {
		if call == 4 || call == 6 || call == 7 {
			return 1
		}
		return 0
	})
	type seen struct {
		Passing bool
		Call    int
	}
	var got []seen
	var mu sync.Mutex
	results, _ := run(t, probe.Config{Exec: ex, Probes: legion.Probes{Readiness: execProbe("ready", 2, 3)},
		Report: func(r probe.Result) {
			mu.Lock()
			got = append(got, seen{r.Passing, ex.count("ready")})
			mu.Unlock()
		}})
	for range 3 {
		next(t, results)
	}
	waitFor(t, "more checks after the last transition", func() bool { return ex.count("ready") >= 14 })
	mu.Lock()
	defer mu.Unlock()
	want := []seen{{true, 3}, {false, 7}, {true, 10}}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("transitions (-want +got):\n%s", d)
	}
}

func TestLivenessFailsOnceThenRecovers(t *testing.T) {
	// Calls 1-2 pass, 3-8 fail, 9 on pass.
	ex := newScripted(func(_ string, call int) int {
		if call >= 3 && call <= 8 {
			return 7
		}
		return 0
	})
	results, _ := run(t, probe.Config{Exec: ex, Probes: legion.Probes{Liveness: execProbe("live", 2, 1)}})
	expect(t, results, probe.Readiness, true) // no readiness probe
	r := expect(t, results, probe.Liveness, false)
	if !strings.Contains(r.Reason, "exit code 7") {
		t.Fatalf("reason %q: want the exit code", r.Reason)
	}
	expect(t, results, probe.Liveness, true)
	if n := ex.count("live"); n < 9 {
		t.Fatalf("recovered after %d checks, want 9 (one result for six failures)", n)
	}
}

func TestStartupGatesLivenessAndReadiness(t *testing.T) {
	ex := newScripted(func(cmd string, call int) int {
		if cmd == "startup" && call <= 3 {
			return 1
		}
		return 0
	})
	var others int
	results, _ := run(t, probe.Config{Exec: ex, Probes: legion.Probes{
		Startup:   execProbe("startup", 10, 1),
		Liveness:  execProbe("live", 1, 1),
		Readiness: execProbe("ready", 1, 1),
	}, Report: func(r probe.Result) {
		if r.Kind == probe.Startup {
			others = ex.count("live") + ex.count("ready")
		}
	}})
	expect(t, results, probe.Startup, true)
	if others != 0 || ex.count("startup") != 4 {
		t.Fatalf("at startup's pass: %d liveness/readiness checks (want 0), %d startup checks (want 4)", others, ex.count("startup"))
	}
	expect(t, results, probe.Readiness, true)
	waitFor(t, "liveness checks", func() bool { return ex.count("live") >= 3 })
	select {
	case r := <-results:
		t.Fatalf("unexpected result %+v: a passing liveness probe reports nothing", r)
	default:
	}
}

func TestStartupFailureEndsProber(t *testing.T) {
	ex := newScripted(func(string, int) int { return 1 })
	results, done := run(t, probe.Config{Exec: ex, Probes: legion.Probes{
		Startup:   execProbe("startup", 3, 1),
		Readiness: execProbe("ready", 1, 1),
	}})
	r := expect(t, results, probe.Startup, false)
	if !strings.Contains(r.Reason, "exit code 1") {
		t.Fatalf("reason %q", r.Reason)
	}
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("prober still running after startup failed for good")
	}
	if ex.count("startup") != 3 || ex.count("ready") != 0 {
		t.Fatalf("checks: startup %d (want 3), readiness %d (want 0)", ex.count("startup"), ex.count("ready"))
	}
	if len(results) != 0 {
		t.Fatalf("results after the failure: %d", len(results))
	}
}

func TestInitialDelayCountsFromStart(t *testing.T) {
	ex := newScripted(func(string, int) int { return 0 })
	started := time.Now()
	p := execProbe("ready", 1, 1)
	p.InitialDelay = legion.Duration(150 * time.Millisecond)
	results, _ := run(t, probe.Config{Exec: ex, Started: started, Probes: legion.Probes{Readiness: p}})
	expect(t, results, probe.Readiness, true)
	ex.mu.Lock()
	first := ex.at["ready"][0]
	ex.mu.Unlock()
	if first.Before(started.Add(150 * time.Millisecond)) {
		t.Fatalf("first check %v after start, want at least the initial delay of 150ms", first.Sub(started))
	}
}

func TestNoProbesReadyAtOnce(t *testing.T) {
	results, _ := run(t, probe.Config{})
	expect(t, results, probe.Readiness, true)
}

func TestNewRefusesWhatCannotRun(t *testing.T) {
	pod := &legion.PodSpec{Containers: []legion.Container{{Name: "c", Ports: []legion.ContainerPort{{Name: "http", ContainerPort: 8080}}}}}
	report := func(probe.Result) {}
	for _, tc := range []struct {
		name string
		cfg  probe.Config
		want string
	}{
		{"unknown port name", probe.Config{Pod: pod, Host: "127.0.0.1", Probes: legion.Probes{Liveness: &legion.Probe{TCP: &legion.TCPProbe{Port: legion.PortRef{Name: "grpc"}}}}},
			`liveness probe: tcp: port "grpc": no container port of the pod has that name`},
		{"port out of range", probe.Config{Host: "127.0.0.1", Probes: legion.Probes{Readiness: &legion.Probe{GRPC: &legion.GRPCProbe{Port: legion.PortRef{Number: 70000}}}}},
			`readiness probe: grpc: port 70000: expected 1 to 65535 or a port name`},
		{"no host", probe.Config{Pod: pod, Probes: legion.Probes{Startup: &legion.Probe{HTTP: &legion.HTTPProbe{Port: legion.PortRef{Name: "http"}}}}},
			`startup probe: http: no target address for a network probe`},
		{"bad scheme", probe.Config{Pod: pod, Host: "127.0.0.1", Probes: legion.Probes{Readiness: &legion.Probe{HTTP: &legion.HTTPProbe{Port: legion.PortRef{Name: "http"}, Scheme: "ftp"}}}},
			`readiness probe: http: scheme "ftp": expected http or https`},
		{"exec without execer", probe.Config{Probes: legion.Probes{Liveness: &legion.Probe{Exec: &legion.ExecProbe{Command: []string{"true"}}}}},
			`liveness probe: exec: no Execer to run the command in the container`},
		{"no sort", probe.Config{Probes: legion.Probes{Liveness: &legion.Probe{}}},
			`liveness probe: expected one of tcp, http, grpc or exec`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.Report = report
			_, err := probe.New(tc.cfg)
			if err == nil || err.Error() != tc.want {
				t.Fatalf("error %v, want %s", err, tc.want)
			}
		})
	}
	if _, err := probe.New(probe.Config{}); err == nil {
		t.Fatal("a prober without Report: want an error")
	}
}

// A container already ready (adopted) starts its readiness probe passing:
// a failure from the first check on is a transition, and is reported.
func TestReadyStartsPassing(t *testing.T) {
	t.Parallel()
	ex := newScripted(func(string, int) int { return 1 })
	results, _ := run(t, probe.Config{Exec: ex, Ready: true, Probes: legion.Probes{Readiness: execProbe("ready", 1, 1)}})
	r := expect(t, results, probe.Readiness, false)
	if !strings.Contains(r.Reason, "exit code 1") {
		t.Fatalf("reason %q: want the exit code", r.Reason)
	}
}
