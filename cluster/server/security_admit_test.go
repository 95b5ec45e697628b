package server

import (
	"testing"

	"google.golang.org/grpc/codes"
)

func allowNS(name, allow string) string {
	return "apiVersion: legion/v1\nkind: Namespace\nmetadata: {name: " + name + "}\nspec: {security: {allow: " + allow + "}}\n"
}

// TestAdmissionSecurityAllowList: each loosening is refused, naming the
// setting, in a namespace whose allow-list lacks it, and accepted once the
// list has it; Jobs and CronJobs are held to it as Services are.
func TestAdmissionSecurityAllowList(t *testing.T) {
	t.Parallel()
	m, c := admitFixture(t)
	cases := []struct {
		name, security, setting, field string
	}{
		{"rawsockets", "{allow: [rawSockets]}", "rawSockets", "spec.pod.containers[0].security.allow"},
		{"chflags", "{allow: [chflags]}", "chflags", "spec.pod.containers[0].security.allow"},
		{"mlock", "{allow: [mlock]}", "mlock", "spec.pod.containers[0].security.allow"},
		{"sysvipc", "{allow: [sysvipc]}", "sysvipc", "spec.pod.containers[0].security.allow"},
		{"securelevel", "{securelevel: 0}", "securelevel", "spec.pod.containers[0].security.securelevel"},
		{"statfs", "{enforceStatfs: 1}", "enforceStatfs", "spec.pod.containers[0].security.enforceStatfs"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ns := "sec-" + tc.name
			svc := "apiVersion: legion/v1\nkind: Service\nmetadata: {name: web, namespace: " + ns + "}\nspec:\n  replicas: 1\n" +
				"  pod: {containers: [{name: c, image: web:1, security: " + tc.security + "}]}\n"
			// No Namespace object: nothing beyond the jail defaults.
			applyRefused(t, m, c, svc, codes.FailedPrecondition, "Service "+ns+"/web", "not allowed in namespace "+ns, tc.field+": "+tc.setting)
			// A list without the entry.
			other := "chflags"
			if tc.setting == "chflags" {
				other = "mlock"
			}
			applyOK(t, c, allowNS(ns, "["+other+"]"))
			applyRefused(t, m, c, svc, codes.FailedPrecondition, "spec.security.allow: "+other, tc.field+": "+tc.setting)
			// The entry given in the same apply admits it.
			applyOK(t, c, allowNS(ns, "["+tc.setting+"]")+"---\n"+svc)
		})
	}
	t.Run("job and cronjob", func(t *testing.T) {
		t.Parallel()
		job := `apiVersion: legion/v1
kind: Job
metadata: {name: j, namespace: sec-jobs}
spec:
  pod: {containers: [{name: c, image: j:1, security: {allow: [rawSockets]}}]}
`
		cron := `apiVersion: legion/v1
kind: CronJob
metadata: {name: cj, namespace: sec-jobs}
spec:
  schedule: "*/5 * * * *"
  job:
    pod: {containers: [{name: c, image: j:1, security: {securelevel: 1}}]}
`
		applyRefused(t, m, c, job, codes.FailedPrecondition, "Job sec-jobs/j", "spec.pod.containers[0].security.allow: rawSockets")
		applyRefused(t, m, c, cron, codes.FailedPrecondition, "CronJob sec-jobs/cj", "spec.job.pod.containers[0].security.securelevel: securelevel")
		applyOK(t, c, allowNS("sec-jobs", "[rawSockets, securelevel]"))
		applyOK(t, c, job+"---\n"+cron)
	})
}
