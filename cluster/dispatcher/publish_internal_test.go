package dispatcher

import (
	"fmt"
	"testing"
	"time"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/cluster/store"
)

// BenchmarkPublishOneTaskChange is what a publication costs the cache
// when one ready task of a service changes its address: by=task brings
// the service's endpoints up to that task alone (what a batch of task
// events does); by=service works the service out again from all its
// tasks (what a change to the Service does, and every task change did
// before). With routes, each of 200 services of 100 tasks has a Route,
// whose backends follow its service's tasks.
func BenchmarkPublishOneTaskChange(b *testing.B) {
	type size struct {
		services, tasks int
		routes          bool
	}
	for _, sz := range []size{{1, 100, false}, {1, 1000, false}, {200, 100, true}} {
		for _, by := range []string{"task", "service"} {
			name := fmt.Sprintf("tasks=%d/by=%s", sz.tasks, by)
			if sz.routes {
				name = fmt.Sprintf("services=%d,tasks=%d,routes/by=%s", sz.services, sz.tasks, by)
			}
			b.Run(name, func(b *testing.B) {
				c := &viewCache{changed: make(chan struct{})}
				c.makeParts()
				c.forget()
				now := time.Now()
				task := func(svc string, i int, ip string) *legion.Task {
					tk := &legion.Task{Header: legion.Header{APIVersion: legion.APIVersion, Kind: legion.KindTask,
						Metadata: legion.Metadata{Namespace: "shop", Name: fmt.Sprintf("%s-%d-1", svc, i)}}}
					tk.Spec.Owner = legion.Owner{Kind: legion.KindService, Name: svc}
					tk.Spec.Node, tk.Spec.DesiredState, tk.Spec.Slot = fmt.Sprintf("n%d", i%256), legion.TaskRunning, i
					tk.Status = legion.TaskStatus{State: legion.TaskRunning, Ready: true, IP: ip, Started: &now}
					return tk
				}
				for s := range sz.services {
					name := fmt.Sprintf("web%d", s)
					svc := &legion.Service{Header: legion.Header{APIVersion: legion.APIVersion, Kind: legion.KindService,
						Metadata: legion.Metadata{Namespace: "shop", Name: name}}}
					svc.Status.VIP = "10.201.0.5"
					svc.Spec.Endpoint.Ports = []legion.ServicePort{{Name: "http", Protocol: legion.TCP, Port: 80, TargetPort: legion.PortRef{Number: 8080}}}
					c.take(store.Event{Type: store.Added, Object: svc})
					for i := range sz.tasks {
						c.take(store.Event{Type: store.Added, Object: task(name, i, fmt.Sprintf("10.%d.%d.%d", 200+s/250, i/250, i%250+1))})
					}
					if sz.routes {
						r := &legion.Route{Header: legion.Header{APIVersion: legion.APIVersion, Kind: legion.KindRoute,
							Metadata: legion.Metadata{Namespace: "shop", Name: name}}}
						r.Spec = legion.RouteSpec{Host: name + ".example", Service: name}
						c.take(store.Event{Type: store.Added, Object: r})
					}
				}
				c.publish()
				moved := []*legion.Task{task("web0", 0, "10.250.0.1"), task("web0", 0, "10.250.0.2")}
				b.ReportAllocs()
				b.ResetTimer()
				for i := range b.N {
					c.take(store.Event{Type: store.Modified, Object: moved[i%2]})
					if by == "service" {
						c.dirtyServices[itemKey("shop", "web0")] = true
					}
					c.publish()
				}
				b.StopTimer()
				if e := c.epVals[itemKey("shop", "web0")]; len(e.Tasks) != sz.tasks || e.Tasks[0].IP != moved[(b.N-1)%2].Status.IP {
					b.Fatalf("the service's endpoints hold %d tasks, the first at %s; want %d, the first at %s",
						len(e.Tasks), e.Tasks[0].IP, sz.tasks, moved[(b.N-1)%2].Status.IP)
				}
				if sz.routes && len(c.routesP.items) != sz.services {
					b.Fatalf("%d routes, want %d", len(c.routesP.items), sz.services)
				}
			})
		}
	}
}

// BenchmarkComposeAfterTaskChanges is what the streams of a rollout cost
// the manager per publication: 256 nodes of 80 tasks each (200 services
// of 100), one task of each of 32 nodes turning ready or stopping, then
// each of those nodes' streams composing its delta, as agents ask for
// it. With secrets=each, every task uses a Secret of its own, which the
// stream sends its node; with routes=tls, every service has a Route
// with a certificate, whose backends follow the tasks.
func BenchmarkComposeAfterTaskChanges(b *testing.B) {
	for _, bc := range []struct {
		name            string
		secrets, routes bool
	}{{"secrets=none", false, false}, {"secrets=each", true, false}, {"routes=tls", false, true}} {
		b.Run(bc.name, func(b *testing.B) {
			st := openStoreWithHistory(b, 0)
			s := New(Fixed(st), Options{})
			c := &viewCache{changed: make(chan struct{})}
			c.makeParts()
			c.forget()
			now := time.Now()
			const nodes, perNode, changed, services = 256, 80, 32, 200
			putSecret := func(name, value string) {
				sec := &legion.Secret{Header: legion.Header{APIVersion: legion.APIVersion, Kind: legion.KindSecret,
					Metadata: legion.Metadata{Namespace: "shop", Name: name}}}
				sec.Spec.Data = []byte(value)
				if _, _, err := st.Put(b.Context(), sec, store.WriteOptions{}); err != nil {
					b.Fatal(err)
				}
			}
			task := func(i int, state legion.TaskState) *legion.Task {
				svc := fmt.Sprintf("web%d", i/100)
				tk := &legion.Task{Header: legion.Header{APIVersion: legion.APIVersion, Kind: legion.KindTask,
					Metadata: legion.Metadata{Namespace: "shop", Name: fmt.Sprintf("%s-%d-1", svc, i%100)}}}
				tk.Spec.Owner = legion.Owner{Kind: legion.KindService, Name: svc}
				tk.Spec.Node, tk.Spec.DesiredState, tk.Spec.Slot = fmt.Sprintf("n%d", i%nodes), legion.TaskRunning, i%100
				tk.Spec.Pod.Containers = []legion.Container{{Name: "app", Image: "example/app:1"}}
				if bc.secrets {
					tk.Spec.Pod.Containers[0].Env = []legion.EnvVar{{Name: "TOKEN", Secret: fmt.Sprintf("s-%d", i)}}
				}
				tk.Status = legion.TaskStatus{State: state, Ready: state == legion.TaskRunning, IP: fmt.Sprintf("10.%d.%d.%d", 200+i/62500, i/250%250, i%250+1), Started: &now}
				return tk
			}
			if bc.routes {
				cert := "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n-----BEGIN EC PRIVATE KEY-----\nMHcC\n-----END EC PRIVATE KEY-----\n"
				for v := range services {
					name := fmt.Sprintf("web%d", v)
					putSecret("tls-"+name, cert)
					svc := &legion.Service{Header: legion.Header{APIVersion: legion.APIVersion, Kind: legion.KindService,
						Metadata: legion.Metadata{Namespace: "shop", Name: name}}}
					svc.Spec.Endpoint.Ports = []legion.ServicePort{{Name: "http", Protocol: legion.TCP, Port: 80, TargetPort: legion.PortRef{Number: 8080}}}
					c.take(store.Event{Type: store.Added, Object: svc})
					r := &legion.Route{Header: legion.Header{APIVersion: legion.APIVersion, Kind: legion.KindRoute,
						Metadata: legion.Metadata{Namespace: "shop", Name: name}}}
					r.Spec = legion.RouteSpec{Host: name + ".example", Service: name, TLS: &legion.RouteTLS{Secret: "tls-" + name}}
					c.take(store.Event{Type: store.Added, Object: r})
				}
			}
			for i := range nodes * perNode {
				if bc.secrets {
					putSecret(fmt.Sprintf("s-%d", i), "value")
				}
				c.take(store.Event{Type: store.Added, Object: task(i, legion.TaskRunning)})
			}
			c.publish()
			streams := make([]*streamState, changed)
			for n := range streams {
				streams[n] = &streamState{node: fmt.Sprintf("n%d", n), sharedWire: true, shape: shape{apart: true, typed: true, lone: true, kept: true}}
				if _, _, err := s.compose(st, c, streams[n], true); err != nil {
					b.Fatal(err)
				}
				streams[n].sent = true
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				state := legion.TaskRunning
				if i%2 == 0 {
					state = legion.TaskShutdown
				}
				for n := range changed {
					c.take(store.Event{Type: store.Modified, Object: task(n, state)})
				}
				c.publish()
				for _, ss := range streams {
					set, _, err := s.compose(st, c, ss, false)
					if err != nil || set == nil || set.GetTaskChanges() == nil {
						b.Fatalf("compose: %v, %v", set, err)
					}
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/changed, "ns/stream")
		})
	}
}
