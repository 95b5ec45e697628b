package legion

import "fmt"

// Dependency holds a service's first tasks back until another service of
// its namespace (or a Job, for completed) reaches a condition: compose's
// depends_on. Once the service has run, its later tasks no longer wait.
type Dependency struct {
	Service   string              `json:"service"`
	Condition DependencyCondition `json:"condition"`
}

// DependencyCondition is what a dependency must reach.
type DependencyCondition string

// Dependency conditions.
const (
	DependStarted   DependencyCondition = "started"   // a task of it runs
	DependReady     DependencyCondition = "ready"     // a task of it is ready
	DependCompleted DependencyCondition = "completed" // a task of it exited successfully
)

// maxDependencies bounds spec.dependsOn.
const maxDependencies = 64

// admitDependsOn checks spec.dependsOn of the service named self. A name
// no service of the namespace has yet is admitted: objects of a stack may
// be applied in any order, and the planner says what the tasks wait for.
func admitDependsOn(self string, deps []Dependency, errs *ErrorList) {
	if len(deps) > maxDependencies {
		errs.add("spec.dependsOn", "%d dependencies: at most %d", len(deps), maxDependencies)
		return
	}
	seen := map[string]int{}
	for i := range deps {
		d := &deps[i]
		dp := fmt.Sprintf("spec.dependsOn[%d]", i)
		if err := ValidName(d.Service); err != nil {
			errs.add(dp+".service", "%v", err)
		} else if d.Service == self {
			errs.add(dp+".service", "%q is this service: it cannot wait for itself", d.Service)
		} else if j, dup := seen[d.Service]; dup {
			errs.add(dp+".service", "%q is already spec.dependsOn[%d]", d.Service, j)
		}
		seen[d.Service] = i
		oneOf(&d.Condition, dp+".condition", DependStarted, []DependencyCondition{DependStarted, DependReady, DependCompleted}, errs)
	}
}
