package compose

import (
	"fmt"
	"math"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/compose-spec/compose-go/v2/types"
	"github.com/legionbsd/legion"
)

// restart maps a service's restart: onto its pod's restart policy, when
// deploy.restart_policy has not set one. unless-stopped is always: Legion
// stops a task only when told to, and then does not restart it.
func (c *converter) restart(p, restart string, pod *legion.PodSpec) {
	if restart == "" {
		return
	}
	if pod.RestartPolicy != nil {
		c.note(p, "%q: deploy.restart_policy is given and wins", restart)
		return
	}
	pol := &legion.RestartPolicy{}
	cond, attempts, hasAttempts := strings.Cut(restart, ":")
	switch cond {
	case "no":
		pol.Condition = legion.RestartNone
	case "always", "unless-stopped":
		pol.Condition = legion.RestartAny
	case "on-failure":
		pol.Condition = legion.RestartOnFailure
	default:
		c.warn(p, "%q is not no, always, on-failure[:N] or unless-stopped; ignored", restart)
		return
	}
	if hasAttempts {
		n, err := strconv.Atoi(attempts)
		if cond != "on-failure" || err != nil || n < 0 {
			c.warn(p, "%q: only on-failure takes a count of attempts (on-failure:3); ignored", restart)
			return
		}
		pol.MaxAttempts = min(n, math.MaxInt32)
	}
	pod.RestartPolicy = pol
}

// dependsConditions maps compose's depends_on conditions to Legion's.
var dependsConditions = map[string]legion.DependencyCondition{
	"":                            legion.DependStarted,
	types.ServiceConditionStarted: legion.DependStarted,
	types.ServiceConditionHealthy: legion.DependReady,
	types.ServiceConditionCompletedSuccessfully: legion.DependCompleted,
}

// dependsOn maps depends_on: the service's first tasks wait, Pending,
// until each dependency has started, is ready (its healthcheck passes) or
// has exited successfully.
func (c *converter) dependsOn(p string, deps types.DependsOnConfig, names *stackNames) []legion.Dependency {
	var out []legion.Dependency
	for _, key := range sortedKeys(deps) {
		d := deps[key]
		dp := p + "." + key
		cond, ok := dependsConditions[d.Condition]
		if !ok {
			c.warn(dp+".condition", "%q is not service_started, service_healthy or service_completed_successfully; ignored", d.Condition)
			continue
		}
		name, ok := names.services[key]
		if !ok {
			c.warn(dp, "no service %s in the file; ignored", key)
			continue
		}
		if names.jobs[key] && cond != legion.DependCompleted {
			// The planner finds a Job only for completed: a job runs to
			// its end, and its start or readiness is no state it keeps.
			c.warn(dp+".condition", "%s is a job: a service waits for a job only to complete (service_completed_successfully); ignored", key)
			continue
		}
		if !d.Required {
			c.warn(dp+".required", "false is not supported: the dependency is waited for all the same")
		}
		out = append(out, legion.Dependency{Service: name, Condition: cond})
	}
	return out
}

// oneShots gives a service that others wait for with
// service_completed_successfully, and that sets no restart policy,
// docker compose's default, none, rather than Swarm's, any: under any, a
// one-shot (a migration, a seed) that exited 0 would be started again
// and again. One whose policy is any is noted as running over and over.
func (c *converter) oneShots(services types.Services, byKey map[string]*legion.Service) {
	waiters := map[string][]string{} // a dependency's key: who waits for it to complete
	for _, key := range sortedKeys(services) {
		for dep, d := range services[key].DependsOn {
			if d.Condition == types.ServiceConditionCompletedSuccessfully {
				waiters[dep] = append(waiters[dep], key)
			}
		}
	}
	for _, dep := range sortedKeys(waiters) {
		svc := byKey[dep]
		if svc == nil {
			continue // a Job, which a task that exited 0 ends; or none, which dependsOn warned of
		}
		who, p := strings.Join(waiters[dep], ", ")+" waits", "services."+dep+".restart"
		if len(waiters[dep]) > 1 {
			who = strings.Join(waiters[dep], ", ") + " wait"
		}
		switch pol := svc.Spec.Pod.RestartPolicy; {
		case pol == nil:
			svc.Spec.Pod.RestartPolicy = &legion.RestartPolicy{Condition: legion.RestartNone}
			c.note(p, "none, as docker compose has it, since %s for it to complete successfully: once it has exited it is not started again (restart or deploy.restart_policy choose otherwise)", who)
		case pol.Condition == legion.RestartAny:
			c.note(p, "%s for it to complete successfully, yet its restart policy starts it again once it has exited 0: it runs over and over", who)
		}
	}
}

// noteHostPaths says once, for every service with bind mounts, what their
// host paths need.
func (c *converter) noteHostPaths() {
	if len(c.hostPathServices) == 0 {
		return
	}
	slices.Sort(c.hostPathServices)
	c.note("services", "the bind mounts of %s become hostPath volumes: each path must exist on every node the tasks may run on, and the namespace must allow hostPath (spec.security.allow, set by a cluster admin)",
		strings.Join(c.hostPathServices, ", "))
}

// name0 is the compose key of the service at path services.<key>.
func name0(p string) string { return strings.TrimPrefix(p, "services.") }

// bindSource resolves a bind mount's source against the compose file's
// directory, as compose does; a path from the home directory (~) is the
// CLI user's, not the node's, and is refused.
func (c *converter) bindSource(vp, src string) (string, error) {
	switch {
	case strings.HasPrefix(src, "/"):
		return path.Clean(src), nil
	case strings.HasPrefix(src, "~"):
		return "", fmt.Errorf("%s: %q: a path under the home directory is not a node's path; write it absolutely", vp, src)
	case c.opts.Dir == "":
		return "", fmt.Errorf("%s: %q is relative and no directory was given to resolve it against", vp, src)
	}
	return path.Join(c.opts.Dir, src), nil
}
