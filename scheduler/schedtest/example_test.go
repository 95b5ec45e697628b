package schedtest_test

import (
	"fmt"
	"time"

	"github.com/legionbsd/legion/scheduler/schedtest"
)

// A cluster in a few lines: nodes, a service, then steps of the planner
// and the simulated agents on a fake clock.
func Example() {
	c := schedtest.New(panicTB{})
	c.AddNodes("n", 3, schedtest.Labels("zone", "a"))
	c.Apply(`
apiVersion: legion/v1
kind: Service
metadata: {name: web}
spec:
  replicas: 2
  pod: {containers: [{name: web, image: web:1}]}
`)
	c.Converge()
	fmt.Println(schedtest.SortedNames(c.Live("web")), c.Running("web"))

	// n1 goes silent: suspect after three missed heartbeats, down after
	// eight, and then its task runs elsewhere.
	lost := c.Task("web-1-1").Spec.Node
	c.Silent[lost] = true
	c.Run(16 * time.Second)
	fmt.Println(c.Node(lost).Status.State, c.Task("web-1-1").Status.State, schedtest.SortedNames(c.Live("web")))
	// Output:
	// [web-1-1 web-2-1] 2
	// down orphaned [web-1-2 web-2-1]
}

// panicTB stops an example on a harness failure.
type panicTB struct{}

func (panicTB) Fatalf(format string, args ...any) { panic(fmt.Sprintf(format, args...)) }
