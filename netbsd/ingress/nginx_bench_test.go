package ingress

import (
	"crypto/tls"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/legionbsd/legion/internal/procstat"
)

// wrkRun is how long each wrk run of BenchmarkProxyAgainstNginx lasts;
// its connections are as many as the earlier figures used.
const (
	wrkRun         = 3 * time.Second
	wrkConnections = 32
	// wrkWarmUp is a run of each proxy before the first measure: the
	// first requests of a fresh process (its heap growing, connections
	// opening) are not what a loaded proxy spends.
	wrkWarmUp = time.Second
)

// nginxRounds is how many times BenchmarkProxyAgainstNginx takes each of
// its four measures, in turn (Legion, nginx, Legion, nginx...), so that a
// change of load on the machine falls on both alike.
var nginxRounds = flag.Int("nginx-rounds", 1, "rounds of BenchmarkProxyAgainstNginx, Legion and nginx in turn")

// BenchmarkProxyAgainstNginx measures the ingress proxy and nginx proxying
// to the same backend, in the same run, with wrk as the client (so the
// client is not the limit), over plain HTTP and over TLS with the same
// certificate. Each measure is one wrk run; run it once, with as many
// rounds as wanted:
//
//	go test -run '^$' -bench ProxyAgainstNginx -benchtime 1x ./netbsd/ingress -nginx-rounds 3
//
// Rounds after the first are named "#01", "#02"...; each nginx measure
// also reports legion/nginx, Legion's figure of the same round over its.
//
// What is compared, so that only the proxies differ: the backend is one
// Go server in a process of its own (not in the benchmark's, where it
// would share the proxy's GOMAXPROCS and collector); nginx runs as many
// workers as the machine has CPUs (the Go proxy uses them all), keeps its
// upstream connections alive over HTTP/1.1 as the ingress proxy does,
// closes no client connection after a number of requests (the Go server
// does not), logs no access (neither does Legion), and sends the backend
// the same headers as the ingress proxy: Host, X-Forwarded-For,
// X-Forwarded-Proto, X-Forwarded-Host, X-Real-IP and Forwarded.
//
// It needs nginx and wrk (Debian's nginx and wrk packages) and skips
// without them.
func BenchmarkProxyAgainstNginx(b *testing.B) {
	nginx, err := exec.LookPath("nginx")
	if err != nil {
		if _, serr := os.Stat("/usr/sbin/nginx"); serr == nil {
			nginx = "/usr/sbin/nginx"
		} else {
			b.Skip("nginx is not installed (Debian: apt-get install nginx)")
		}
	}
	if _, err := exec.LookPath("wrk"); err != nil {
		b.Skip("wrk is not installed (Debian: apt-get install wrk)")
	}
	be := backendProcess(b, "web")
	certPEM := newTestCA(b).leafPEM(b, 2, "localhost")

	p := &Proxy{}
	p.SetRoutes([]Route{{Namespace: "ns", Name: "web", Host: "localhost", Backends: []string{be}, TLSSecret: "web-tls"}})
	p.SetCertificates(map[string]*tls.Certificate{"ns/web-tls": mustParse(b, certPEM)})
	legionHTTP := serveOn(b, p, false)
	legionTLS := serveOn(b, p, true)
	nginxHTTP, nginxTLS, nginxPID := startNginx(b, nginx, be, certPEM)

	for _, url := range []string{"http://" + legionHTTP + "/", "https://" + legionTLS + "/", "http://" + nginxHTTP + "/", "https://" + nginxTLS + "/"} {
		wrk(b, url, wrkWarmUp)
	}
	for range max(*nginxRounds, 1) {
		for _, scheme := range []struct{ name, legion, nginx string }{
			{"http", "http://" + legionHTTP + "/", "http://" + nginxHTTP + "/"},
			{"https", "https://" + legionTLS + "/", "https://" + nginxTLS + "/"},
		} {
			var legion float64
			b.Run(scheme.name+"/legion", func(b *testing.B) {
				legion = measure(b, scheme.legion, func() []int { return []int{os.Getpid()} })
			})
			b.Run(scheme.name+"/nginx", func(b *testing.B) {
				rate := measure(b, scheme.nginx, func() []int { return childrenOf(nginxPID) })
				if legion > 0 && rate > 0 {
					b.ReportMetric(legion/rate, "legion/nginx")
				}
			})
		}
	}
}

// serveOn serves p on localhost (so TLS clients send it as SNI) on a free
// port, until the benchmark ends.
func serveOn(b *testing.B, p *Proxy, useTLS bool) string {
	_, port, _ := net.SplitHostPort(serveAt(b, p, useTLS, "localhost:0").String())
	return "localhost:" + port
}

// startNginx runs nginx as a reverse proxy to backend on free localhost
// ports, plain and TLS, with kept-alive upstream connections, as an
// operator would configure it in front of a service.
func startNginx(b *testing.B, nginx, backend string, certPEM []byte) (httpAddr, tlsAddr string, pid int) {
	dir := b.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "cert.pem"), certPEM, 0o600); err != nil {
		b.Fatal(err)
	}
	ports := make([]string, 2)
	for i := range ports {
		l, err := net.Listen("tcp", "localhost:0")
		if err != nil {
			b.Fatal(err)
		}
		_, ports[i], _ = net.SplitHostPort(l.Addr().String())
		l.Close()
	}
	conf := fmt.Sprintf(`worker_processes %[5]d;
pid %[1]s/nginx.pid;
error_log %[1]s/error.log;
daemon off;
user root;
events { worker_connections 1024; }
http {
  access_log off;
  keepalive_requests 1000000;
  client_body_temp_path %[1]s/body; proxy_temp_path %[1]s/proxy; fastcgi_temp_path %[1]s/fastcgi;
  uwsgi_temp_path %[1]s/uwsgi; scgi_temp_path %[1]s/scgi;
  upstream backend { server %[2]s; keepalive 64; keepalive_requests 1000000; }
  server {
    listen localhost:%[3]s;
    listen localhost:%[4]s ssl;
    ssl_certificate %[1]s/cert.pem;
    ssl_certificate_key %[1]s/cert.pem;
    location / {
      proxy_pass http://backend;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_set_header Host $http_host;
      proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
      proxy_set_header X-Forwarded-Proto $scheme;
      proxy_set_header X-Forwarded-Host $http_host;
      proxy_set_header X-Real-IP $remote_addr;
      proxy_set_header Forwarded "for=$remote_addr;host=\"$http_host\";proto=$scheme";
    }
  }
}
`, dir, backend, ports[0], ports[1], runtime.NumCPU())
	if err := os.WriteFile(filepath.Join(dir, "nginx.conf"), []byte(conf), 0o600); err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(nginx, "-p", dir, "-c", filepath.Join(dir, "nginx.conf"))
	b.Cleanup(func() {
		if cmd.Process != nil {
			// TERM: the master stops its workers before it exits (a
			// killed master would leave them running).
			cmd.Process.Signal(syscall.SIGTERM)
			cmd.Wait()
		}
	})
	if out, err := exec.Command(nginx, "-t", "-p", dir, "-c", filepath.Join(dir, "nginx.conf")).CombinedOutput(); err != nil {
		b.Fatalf("nginx -t: %v\n%s", err, out)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	httpAddr, tlsAddr = "localhost:"+ports[0], "localhost:"+ports[1]
	c := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := c.Get("http://" + httpAddr + "/")
		if err == nil {
			resp.Body.Close()
			return httpAddr, tlsAddr, cmd.Process.Pid
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(dir, "error.log"))
			b.Fatalf("nginx did not answer: %v\n%s", err, log)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// measure runs wrk against url b.N times and reports the mean requests
// per second, which it returns, and, where /proc tells, the CPU time the
// proxy's processes (procs) spent per request: a figure that varies less
// than the rate with what else the machine runs.
func measure(b *testing.B, url string, procs func() []int) float64 {
	var rate, requests float64
	var cpu time.Duration
	cpuKnown := true
	for b.Loop() {
		before, ok := procstat.CPUTime(procs()...)
		r, n := wrk(b, url, wrkRun)
		after, ok2 := procstat.CPUTime(procs()...)
		cpuKnown = cpuKnown && ok && ok2
		rate, requests, cpu = rate+r, requests+n, cpu+after-before
	}
	rate /= float64(b.N)
	b.ReportMetric(rate, "req/s")
	if cpuKnown && requests > 0 {
		b.ReportMetric(float64(cpu.Microseconds())/requests, "cpu-us/req")
	}
	return rate
}

// childrenOf are the processes whose parent is pid (nginx's workers).
func childrenOf(pid int) []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		child, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, err := procstat.Read(child); err == nil && st.Parent == pid {
			out = append(out, child)
		}
	}
	return out
}

var (
	wrkRate     = regexp.MustCompile(`Requests/sec:\s+([0-9.]+)`)
	wrkRequests = regexp.MustCompile(`([0-9]+) requests in`)
)

// wrk runs wrk against url for d and returns its requests per second and
// the requests it made; non-2xx answers fail the benchmark.
func wrk(b *testing.B, url string, d time.Duration) (rate, requests float64) {
	out, err := exec.Command("wrk", "-t", "2", "-c", strconv.Itoa(wrkConnections), "-d", strconv.Itoa(int(d.Seconds()))+"s", url).CombinedOutput()
	if err != nil {
		b.Fatalf("wrk %s: %v\n%s", url, err, out)
	}
	if regexp.MustCompile(`Non-2xx or 3xx responses`).Match(out) {
		b.Fatalf("wrk %s: errors\n%s", url, out)
	}
	m, n := wrkRate.FindSubmatch(out), wrkRequests.FindSubmatch(out)
	if m == nil || n == nil {
		b.Fatalf("wrk printed no rate:\n%s", out)
	}
	rate, _ = strconv.ParseFloat(string(m[1]), 64)
	requests, _ = strconv.ParseFloat(string(n[1]), 64)
	return rate, requests
}
