package ingress

import (
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// wrkRun is how long each wrk run of BenchmarkProxyAgainstNginx lasts;
// its connections are as many as the earlier figures used.
const (
	wrkRun         = 3 * time.Second
	wrkConnections = 32
)

// BenchmarkProxyAgainstNginx measures the ingress proxy and nginx proxying
// to the same backend, in the same run, with wrk as the client (so the
// client is not the limit), over plain HTTP and over TLS with the same
// certificate. Each iteration is one wrk run; run it once:
//
//	go test -run '^$' -bench ProxyAgainstNginx -benchtime 1x ./netbsd/ingress
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
	be := namedBackend(b, "web")
	certPEM := newTestCA(b).leafPEM(b, 2, "localhost")

	p := &Proxy{}
	p.SetRoutes([]Route{{Namespace: "ns", Name: "web", Host: "localhost", Backends: []string{addr(be)}, TLSSecret: "web-tls"}})
	p.SetCertificates(map[string]*tls.Certificate{"ns/web-tls": mustParse(b, certPEM)})
	legionHTTP := serveOn(b, p, false)
	legionTLS := serveOn(b, p, true)
	nginxHTTP, nginxTLS := startNginx(b, nginx, addr(be), certPEM)

	for _, c := range []struct{ name, url string }{
		{"http/legion", "http://" + legionHTTP + "/"},
		{"http/nginx", "http://" + nginxHTTP + "/"},
		{"https/legion", "https://" + legionTLS + "/"},
		{"https/nginx", "https://" + nginxTLS + "/"},
	} {
		b.Run(c.name, func(b *testing.B) {
			var total float64
			for b.Loop() {
				total += wrk(b, c.url)
			}
			b.ReportMetric(total/float64(b.N), "req/s")
		})
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
func startNginx(b *testing.B, nginx, backend string, certPEM []byte) (httpAddr, tlsAddr string) {
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
	conf := fmt.Sprintf(`worker_processes 2;
pid %[1]s/nginx.pid;
error_log %[1]s/error.log;
daemon off;
user root;
events { worker_connections 1024; }
http {
  access_log off;
  client_body_temp_path %[1]s/body; proxy_temp_path %[1]s/proxy; fastcgi_temp_path %[1]s/fastcgi;
  uwsgi_temp_path %[1]s/uwsgi; scgi_temp_path %[1]s/scgi;
  upstream backend { server %[2]s; keepalive 64; }
  server {
    listen localhost:%[3]s;
    listen localhost:%[4]s ssl;
    ssl_certificate %[1]s/cert.pem;
    ssl_certificate_key %[1]s/cert.pem;
    location / {
      proxy_pass http://backend;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_set_header Host $host;
      proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
      proxy_set_header X-Forwarded-Proto $scheme;
    }
  }
}
`, dir, backend, ports[0], ports[1])
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
			return httpAddr, tlsAddr
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(dir, "error.log"))
			b.Fatalf("nginx did not answer: %v\n%s", err, log)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

var wrkRate = regexp.MustCompile(`Requests/sec:\s+([0-9.]+)`)

// wrk runs wrk against url and returns its requests per second; non-2xx
// answers fail the benchmark.
func wrk(b *testing.B, url string) float64 {
	out, err := exec.Command("wrk", "-t", "2", "-c", strconv.Itoa(wrkConnections), "-d", strconv.Itoa(int(wrkRun.Seconds()))+"s", url).CombinedOutput()
	if err != nil {
		b.Fatalf("wrk %s: %v\n%s", url, err, out)
	}
	if regexp.MustCompile(`Non-2xx or 3xx responses`).Match(out) {
		b.Fatalf("wrk %s: errors\n%s", url, out)
	}
	m := wrkRate.FindSubmatch(out)
	if m == nil {
		b.Fatalf("wrk printed no rate:\n%s", out)
	}
	v, _ := strconv.ParseFloat(string(m[1]), 64)
	return v
}
