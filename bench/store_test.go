// Package bench holds benchmarks that compare Legion with the tools
// people would use instead. It is its own module, so etcd's client stays
// out of the project's; bench/run starts those tools and runs these.
package bench

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/client"
	"github.com/legionbsd/legion/internal/procstat"
	"github.com/legionbsd/legion/internal/testcluster"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// valueSize is the bytes each write carries, to Legion and to etcd alike.
const valueSize = 512

// pacedRate is the write rate at which latency is measured (writes/s).
const pacedRate = 1000

// writer is one system under test: put writes key with value.
type writer interface {
	put(ctx context.Context, key, value string) error
}

type etcdWriter struct{ c *clientv3.Client }

func (w etcdWriter) put(ctx context.Context, key, value string) error {
	_, err := w.c.Put(ctx, key, value)
	return err
}

type legionWriter struct{ c *client.Client }

// put applies a Config and asks for a brief answer (the object's stored
// metadata, not its body): etcd's Put answers with the revision alone,
// not the value written, and a client that wants no more asks no more.
func (w legionWriter) put(ctx context.Context, key, value string) error {
	o, _ := legion.New(legion.KindConfig)
	cfg := o.(*legion.Config)
	cfg.Metadata.Name, cfg.Metadata.Namespace = key, legion.DefaultNamespace
	cfg.Spec.Text = value
	_, err := w.c.ApplyOne(ctx, cfg, client.ApplyOptions{Brief: true})
	return err
}

// BenchmarkStore writes valueSize-byte values to Legion (through its API
// and Go client, as any client writes) and to etcd (through its Go
// client), with one and three members, from one client in sequence and
// from 64 at once; then 64 clients at pacedRate writes/s for latency.
// etcd's endpoints come from BENCH_ETCD1 and BENCH_ETCD3 (comma
// separated; bench/run starts both clusters), and BENCH_ETCD1_TLS and
// BENCH_ETCD3_TLS for etcd with mutual TLS (certificates in
// BENCH_ETCD_TLS_DIR), as Legion's API and Raft always are; without them
// only Legion runs. Legion's managers are the daemons at BENCH_LEGION1 and
// BENCH_LEGION3 when set (see legionCluster). Every write is fsynced on a
// quorum by both. Where the servers' process ids are given (each
// variable's name with _PIDS, comma separated), the CPU the servers spent
// per write is reported too (server-cpu-us/write), and with it the CPU
// this process, where the clients write from, spent per write
// (client-cpu-us/write): on a shared machine the rate of 64 clients is
// bound by the two.
//
// Each figure is the median of BENCH_ROUNDS rounds (3 when unset) of
// b.N writes, Legion and etcd taking turns round by round (the first
// alternating), so a burst of load on a shared machine lands on both
// rather than on whichever ran at that moment. The first of the two
// sub-benchmarks of a figure measures both; the second reports what it
// measured. -benchtime must be at least 2x: testing's first call, with
// b.N 1, makes one write and reports nothing.
//
//	BENCH_ETCD1=127.0.0.1:2379 go test -run '^$' -bench Store -benchtime 3000x
func BenchmarkStore(b *testing.B) {
	for _, members := range []int{1, 3} {
		systems := map[string]system{}
		if env := fmt.Sprintf("BENCH_ETCD%d", members); os.Getenv(env) != "" {
			systems["etcd"] = system{etcdCluster(b, os.Getenv(env), nil), pidsOf(b, env)}
		}
		if env := fmt.Sprintf("BENCH_ETCD%d_TLS", members); os.Getenv(env) != "" {
			systems["etcd-tls"] = system{etcdCluster(b, os.Getenv(env), etcdTLS(b, os.Getenv("BENCH_ETCD_TLS_DIR"))), pidsOf(b, env)}
		}
		systems["legion"] = system{legionCluster(b, members), pidsOf(b, fmt.Sprintf("BENCH_LEGION%d", members))}
		var names []string
		for _, name := range []string{"legion", "etcd", "etcd-tls"} {
			if _, ok := systems[name]; ok {
				names = append(names, name)
			}
		}
		for _, load := range []struct{ clients, rate int }{{1, 0}, {64, 0}, {64, pacedRate}} {
			var measured map[string][]figure // by system, once b.N > 1
			for _, name := range names {
				sub := fmt.Sprintf("%s/members=%d/clients=%d", name, members, load.clients)
				if load.rate > 0 {
					sub += fmt.Sprintf("/rate=%d", load.rate)
				}
				b.Run(sub, func(b *testing.B) {
					if b.N == 1 {
						// testing's first call, before the one with -benchtime's
						// count: one write, nothing reported from it.
						if _, err := measure(systems[name], 1, 1, 0); err != nil {
							b.Fatal(err)
						}
						return
					}
					if measured == nil {
						var err error
						if measured, err = inTurns(systems, names, b.N, load.clients, load.rate); err != nil {
							b.Fatal(err)
						}
					}
					report(b, measured[name])
				})
			}
		}
	}
}

// etcdCluster is a writer to the etcd members at eps (comma separated),
// over tc when set.
func etcdCluster(b *testing.B, eps string, tc *tls.Config) writer {
	c, err := clientv3.New(clientv3.Config{Endpoints: strings.Split(eps, ","), DialTimeout: 10 * time.Second, TLS: tc})
	if err != nil {
		b.Fatalf("etcd at %s: %v", eps, err)
	}
	b.Cleanup(func() { c.Close() })
	return etcdWriter{c}
}

// etcdTLS is the client side of mutual TLS with the certificates
// bench/run made in dir: ca.crt, and tls.crt and tls.key for the client.
func etcdTLS(b *testing.B, dir string) *tls.Config {
	cert, err := tls.LoadX509KeyPair(filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"))
	if err != nil {
		b.Fatalf("etcd's client certificate: %v", err)
	}
	ca, err := os.ReadFile(filepath.Join(dir, "ca.crt"))
	if err != nil {
		b.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		b.Fatalf("no certificate in %s", filepath.Join(dir, "ca.crt"))
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: pool, MinVersion: tls.VersionTLS13}
}

// system is one system under test: its writer, and its servers'
// process ids when they are known (their CPU is then measured).
type system struct {
	w    writer
	pids []int
}

// pidsOf reads the process ids in env's _PIDS variable (comma separated).
func pidsOf(b *testing.B, env string) []int {
	var pids []int
	for f := range strings.SplitSeq(os.Getenv(env+"_PIDS"), ",") {
		if f == "" {
			continue
		}
		pid, err := strconv.Atoi(f)
		if err != nil {
			b.Fatalf("%s_PIDS: %q is no process id", env, f)
		}
		pids = append(pids, pid)
	}
	return pids
}

// figure is one round's measure of a system.
type figure struct {
	writesPerSec float64
	p50, p99     time.Duration
	// The servers' and the clients' CPU per write, when cpuKnown.
	cpuPerWrite, clientCPUPerWrite time.Duration
	cpuKnown                       bool
}

// rounds is how many rounds each figure takes (BENCH_ROUNDS, else 3).
func rounds() int {
	if n, err := strconv.Atoi(os.Getenv("BENCH_ROUNDS")); err == nil && n > 0 {
		return n
	}
	return 3
}

// inTurns measures every system rounds() times, n writes each time, the
// systems taking turns (the order reversed every other round).
func inTurns(systems map[string]system, names []string, n, clients, rate int) (map[string][]figure, error) {
	out := map[string][]figure{}
	for r := range rounds() {
		order := slices.Clone(names)
		if r%2 == 1 {
			slices.Reverse(order)
		}
		for _, name := range order {
			f, err := measure(systems[name], n, clients, rate)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
			out[name] = append(out[name], f)
		}
	}
	return out, nil
}

// report reports the medians of a system's rounds: writes/s, and the
// 50th and 99th percentile latency of a write.
func report(b *testing.B, fs []figure) {
	median := func(v func(figure) float64) float64 {
		xs := make([]float64, len(fs))
		for i, f := range fs {
			xs[i] = v(f)
		}
		slices.Sort(xs)
		return xs[len(xs)/2]
	}
	w := median(func(f figure) float64 { return f.writesPerSec })
	b.ReportMetric(w, "writes/s")
	b.ReportMetric(1e9/w, "ns/op")
	b.ReportMetric(median(func(f figure) float64 { return ms(f.p50) }), "p50-ms")
	b.ReportMetric(median(func(f figure) float64 { return ms(f.p99) }), "p99-ms")
	if !slices.ContainsFunc(fs, func(f figure) bool { return !f.cpuKnown }) {
		b.ReportMetric(median(func(f figure) float64 { return us(f.cpuPerWrite) }), "server-cpu-us/write")
		b.ReportMetric(median(func(f figure) float64 { return us(f.clientCPUPerWrite) }), "client-cpu-us/write")
	}
}

// legionCluster is a writer to Legion managers: those at BENCH_LEGIONn
// (daemons bench/run started, a process apart as etcd is, with the
// admin's credentials in BENCH_LEGIONn_CREDENTIALS), else members
// started in this process by internal/testcluster.
func legionCluster(b *testing.B, members int) writer {
	env := fmt.Sprintf("BENCH_LEGION%d", members)
	if addr := os.Getenv(env); addr != "" {
		c, err := client.New(client.Options{Server: addr, CredentialsFile: os.Getenv(env + "_CREDENTIALS"), Retry: 30 * time.Second})
		if err != nil {
			b.Fatalf("Legion at %s: %v", addr, err)
		}
		b.Cleanup(func() { c.Close() })
		return legionWriter{c}
	}
	tc := testcluster.New(b, testcluster.Options{Managers: members, Leader: true})
	tc.WaitLeader()
	return legionWriter{tc.Client()}
}

// runs numbers the measures, so each writes new keys.
var runs atomic.Int64

// measure makes n writes to s from clients writers, at most rate a second
// when rate is set, and returns writes/s, the 50th and 99th percentile
// latency of a write and, when s's servers are known, the CPU they and
// this process spent per write.
func measure(s system, n, clients, rate int) (figure, error) {
	value := strings.Repeat("x", valueSize)
	prefix := fmt.Sprintf("bench-%d-%d", time.Now().UnixNano()%1e6, runs.Add(1))
	ctx := context.Background()
	var pace <-chan time.Time
	if rate > 0 {
		t := time.NewTicker(time.Second / time.Duration(rate))
		defer t.Stop()
		pace = t.C
	}
	lat := make([]time.Duration, n)
	var next atomic.Int64
	var wg sync.WaitGroup
	var failed atomic.Pointer[error]
	cpu0, cpuKnown := procstat.CPUTime(s.pids...)
	client0, clientKnown := procstat.CPUTime(os.Getpid())
	start := time.Now()
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for failed.Load() == nil {
				i := next.Add(1) - 1
				if i >= int64(n) {
					return
				}
				if pace != nil {
					<-pace
				}
				t0 := time.Now()
				if err := s.w.put(ctx, fmt.Sprintf("%s-%d", prefix, i), value); err != nil {
					failed.CompareAndSwap(nil, &err)
					return
				}
				lat[i] = time.Since(t0)
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	cpu1, ok := procstat.CPUTime(s.pids...)
	client1, clientOK := procstat.CPUTime(os.Getpid())
	if err := failed.Load(); err != nil {
		return figure{}, *err
	}
	slices.Sort(lat)
	f := figure{writesPerSec: float64(n) / elapsed.Seconds(), p50: lat[len(lat)/2], p99: lat[len(lat)*99/100]}
	if len(s.pids) > 0 && cpuKnown && ok && clientKnown && clientOK {
		f.cpuKnown = true
		f.cpuPerWrite, f.clientCPUPerWrite = (cpu1-cpu0)/time.Duration(n), (client1-client0)/time.Duration(n)
	}
	return f, nil
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func us(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1000 }
