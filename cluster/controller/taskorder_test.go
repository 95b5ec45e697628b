package controller

import (
	"cmp"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/legionbsd/legion"
)

func orderTask(ns, name string, gen uint64) *legion.Task {
	t := &legion.Task{Header: legion.Header{Kind: legion.KindTask, Metadata: legion.Metadata{Namespace: ns, Name: name}}}
	t.Metadata.Generation = gen
	return t
}

// Tasks made, changed, deleted and made again between passes come out
// of every pass as a list of the store gives them: each task once, its
// latest value, in key order (namespaces whose names sort apart from
// their keys, "a" and "a-b", among them).
func TestTaskOrderIsTheStoresOrder(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	o := newTaskOrder(0)
	want := map[string]*legion.Task{}
	namespaces := []string{"a", "a-b", "b", "default"}
	for pass := range 200 {
		for range rng.IntN(40) {
			ns, name := namespaces[rng.IntN(len(namespaces))], fmt.Sprintf("web-%d", rng.IntN(60))
			key := ns + "/" + name
			if rng.IntN(3) == 0 {
				o.remove(key)
				delete(want, key)
				continue
			}
			task := orderTask(ns, name, uint64(pass))
			o.put(key, task)
			want[key] = task
		}
		got := o.sorted()
		keys := slices.Sorted(maps.Keys(want))
		if len(got) != len(keys) || len(o.byKey) != len(keys) {
			t.Fatalf("pass %d: %d tasks (len %d), want %d", pass, len(got), len(o.byKey), len(keys))
		}
		for i, k := range keys {
			if got[i] != want[k] {
				t.Fatalf("pass %d: task %d is %s/%s (generation %d), want %s (generation %d)", pass, i,
					got[i].Metadata.Namespace, got[i].Metadata.Name, got[i].Metadata.Generation, k, want[k].Metadata.Generation)
			}
		}
		// The slice is the caller's: changing it changes no later pass.
		if len(got) > 0 {
			got[0] = nil
		}
	}
}

// BenchmarkTaskOrder is a pass's reading of the cache's tasks during a
// rollout: 40,000 tasks, of which 400 changed, 100 made and 100 deleted
// since the last pass. "merge" is taskOrder; "sort-all" is what a pass
// did before it, copying every task out of a map and sorting them.
//
//	go test -run '^$' -bench TaskOrder ./cluster/controller
func BenchmarkTaskOrder(b *testing.B) {
	const tasks, changed, churn = 40000, 400, 100
	key := func(i int) (string, string) { return "default", fmt.Sprintf("web-%d-%06d", i%200, i) }
	b.Run("merge", func(b *testing.B) {
		o := newTaskOrder(tasks)
		for i := range tasks {
			ns, name := key(i)
			o.put(ns+"/"+name, orderTask(ns, name, 0))
		}
		o.sorted()
		next := tasks
		b.ResetTimer()
		for n := range b.N {
			for i := range changed {
				ns, name := key(next - tasks + (n*changed+i)%tasks)
				o.put(ns+"/"+name, orderTask(ns, name, uint64(n)))
			}
			for range churn {
				ns, name := key(next - tasks)
				o.remove(ns + "/" + name)
				ns, name = key(next)
				o.put(ns+"/"+name, orderTask(ns, name, uint64(n)))
				next++
			}
			if got := o.sorted(); len(got) != tasks {
				b.Fatalf("%d tasks, want %d", len(got), tasks)
			}
		}
	})
	b.Run("sort-all", func(b *testing.B) {
		m := make(map[string]legion.Object, tasks)
		for i := range tasks {
			ns, name := key(i)
			m[ns+"/"+name] = orderTask(ns, name, 0)
		}
		next := tasks
		b.ResetTimer()
		for n := range b.N {
			for i := range changed {
				ns, name := key(next - tasks + (n*changed+i)%tasks)
				m[ns+"/"+name] = orderTask(ns, name, uint64(n))
			}
			for range churn {
				ns, name := key(next - tasks)
				delete(m, ns+"/"+name)
				ns, name = key(next)
				m[ns+"/"+name] = orderTask(ns, name, uint64(n))
				next++
			}
			out := make([]*legion.Task, 0, len(m))
			for _, o := range m {
				out = append(out, o.(*legion.Task))
			}
			slices.SortFunc(out, func(a, b *legion.Task) int {
				return cmp.Or(strings.Compare(a.Metadata.Namespace, b.Metadata.Namespace), strings.Compare(a.Metadata.Name, b.Metadata.Name))
			})
			if len(out) != tasks {
				b.Fatalf("%d tasks, want %d", len(out), tasks)
			}
		}
	})
}
