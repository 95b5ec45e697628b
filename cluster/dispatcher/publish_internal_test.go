package dispatcher

import (
	"fmt"
	"testing"
	"time"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/cluster/store"
)

// BenchmarkPublishOneTaskChange is what a publication costs the cache
// when one ready task of a service of n changes its address: by=task
// brings the service's endpoints up to that task alone (what a batch of
// task events does); by=service works the service out again from all its
// tasks (what a change to the Service does, and every task change did
// before).
func BenchmarkPublishOneTaskChange(b *testing.B) {
	for _, n := range []int{100, 1000} {
		for _, by := range []string{"task", "service"} {
			b.Run(fmt.Sprintf("tasks=%d/by=%s", n, by), func(b *testing.B) {
				c := &viewCache{changed: make(chan struct{})}
				c.makeParts()
				c.forget()
				svc := &legion.Service{Header: legion.Header{APIVersion: legion.APIVersion, Kind: legion.KindService,
					Metadata: legion.Metadata{Namespace: "shop", Name: "web"}}}
				svc.Status.VIP = "10.201.0.5"
				svc.Spec.Endpoint.Ports = []legion.ServicePort{{Name: "http", Protocol: legion.TCP, Port: 80, TargetPort: legion.PortRef{Number: 8080}}}
				c.take(store.Event{Type: store.Added, Object: svc})
				now := time.Now()
				task := func(i int, ip string) *legion.Task {
					tk := &legion.Task{Header: legion.Header{APIVersion: legion.APIVersion, Kind: legion.KindTask,
						Metadata: legion.Metadata{Namespace: "shop", Name: fmt.Sprintf("web-%d-1", i)}}}
					tk.Spec.Owner = legion.Owner{Kind: legion.KindService, Name: "web"}
					tk.Spec.Node, tk.Spec.DesiredState, tk.Spec.Slot = fmt.Sprintf("n%d", i%256), legion.TaskRunning, i
					tk.Status = legion.TaskStatus{State: legion.TaskRunning, Ready: true, IP: ip, Started: &now}
					return tk
				}
				for i := range n {
					c.take(store.Event{Type: store.Added, Object: task(i, fmt.Sprintf("10.200.%d.%d", i/250, i%250+1))})
				}
				c.publish()
				moved := []*legion.Task{task(0, "10.250.0.1"), task(0, "10.250.0.2")}
				b.ReportAllocs()
				b.ResetTimer()
				for i := range b.N {
					c.take(store.Event{Type: store.Modified, Object: moved[i%2]})
					if by == "service" {
						c.dirtyServices[itemKey("shop", "web")] = true
					}
					c.publish()
				}
				b.StopTimer()
				if e := c.epVals[itemKey("shop", "web")]; len(e.Tasks) != n || e.Tasks[0].IP != moved[(b.N-1)%2].Status.IP {
					b.Fatalf("the service's endpoints hold %d tasks, the first at %s; want %d, the first at %s",
						len(e.Tasks), e.Tasks[0].IP, n, moved[(b.N-1)%2].Status.IP)
				}
			})
		}
	}
}
