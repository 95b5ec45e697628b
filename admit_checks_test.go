package legion

import (
	"fmt"
	"strings"
	"testing"
)

func manifest(kind, name, spec string) string {
	return fmt.Sprintf("apiVersion: legion/v1\nkind: %s\nmetadata: {name: %s}\nspec: %s\n", kind, name, spec)
}

// pod wraps containers (and extra pod fields) into a service spec.
func svcSpec(extra, pod string) string {
	return "{" + extra + "pod: {" + pod + "}}"
}

const web = "{name: web, image: nginx, ports: [{name: http, containerPort: 80}]}"

// Every cross-field check and limit, each with an object that passes and
// one that fails with the expected error.
func TestCrossFieldChecksAndLimits(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("a", MaxValueSize)
	cases := []struct {
		name        string
		kind        string
		good, bad   string
		want        string
		goodN, badN string // object names, default "x"
	}{
		// Ports resolve and are unique across the pod.
		{name: "probe port name resolves", kind: "Service",
			good: svcSpec("", "containers: [{name: web, image: n, ports: [{name: http, containerPort: 80}], probes: {readiness: {tcp: {port: http}}}}]"),
			bad:  svcSpec("", "containers: [{name: web, image: n, ports: [{name: http, containerPort: 80}], probes: {readiness: {tcp: {port: htp}}}}]"),
			want: `spec.pod.containers[0].probes.readiness.tcp.port: "htp" names no container port of the pod`},
		{name: "probe port resolves in another container of the pod", kind: "Service",
			good: svcSpec("", "containers: ["+web+", {name: side, image: n, probes: {liveness: {http: {port: http}}}}]"),
			bad:  svcSpec("", "containers: ["+web+", {name: side, image: n, probes: {liveness: {http: {port: metrics}}}}]"),
			want: `spec.pod.containers[1].probes.liveness.http.port: "metrics" names no container port`},
		{name: "probe has exactly one handler", kind: "Service",
			good: svcSpec("", "containers: [{name: web, image: n, probes: {liveness: {exec: {command: [true]}}}}]"),
			bad:  svcSpec("", "containers: [{name: web, image: n, probes: {liveness: {exec: {command: [true]}, tcp: {port: 80}}}}]"),
			want: "spec.pod.containers[0].probes.liveness: expected exactly one of tcp, http, grpc or exec, got 2"},
		{name: "probe port range", kind: "Service",
			good: svcSpec("", "containers: [{name: web, image: n, probes: {liveness: {grpc: {port: 65535}}}}]"),
			bad:  svcSpec("", "containers: [{name: web, image: n, probes: {liveness: {grpc: {port: 65536}}}}]"),
			want: "spec.pod.containers[0].probes.liveness.grpc.port: 65536 is out of range"},
		{name: "exec probe needs a command", kind: "Service",
			good: svcSpec("", "containers: [{name: web, image: n, probes: {readiness: {exec: {command: [pg_isready]}}}}]"),
			bad:  svcSpec("", "containers: [{name: web, image: n, probes: {readiness: {exec: {command: []}}}}]"),
			want: "spec.pod.containers[0].probes.readiness.exec.command: missing"},
		{name: "http probe path", kind: "Service",
			good: svcSpec("", "containers: [{name: web, image: n, probes: {readiness: {http: {port: 80, path: /ok}}}}]"),
			bad:  svcSpec("", "containers: [{name: web, image: n, probes: {readiness: {http: {port: 80, path: ok}}}}]"),
			want: `spec.pod.containers[0].probes.readiness.http.path: "ok": expected a path starting with /`},
		{name: "liveness success threshold is 1", kind: "Service",
			good: svcSpec("", "containers: [{name: web, image: n, probes: {readiness: {tcp: {port: 80}, successThreshold: 2}}}]"),
			bad:  svcSpec("", "containers: [{name: web, image: n, probes: {liveness: {tcp: {port: 80}, successThreshold: 2}}}]"),
			want: "spec.pod.containers[0].probes.liveness.successThreshold: must be 1"},
		{name: "init containers take no probes", kind: "Service",
			good: svcSpec("", "initContainers: [{name: init, image: n}], containers: [{name: web, image: n}]"),
			bad:  svcSpec("", "initContainers: [{name: init, image: n, probes: {liveness: {tcp: {port: 1}}}}], containers: [{name: web, image: n}]"),
			want: "spec.pod.initContainers[0].probes: init containers run to completion"},
		{name: "service target port resolves", kind: "Service",
			good: svcSpec("endpoint: {ports: [{port: 80, targetPort: http}]}, ", "containers: ["+web+"]"),
			bad:  svcSpec("endpoint: {ports: [{port: 80, targetPort: https}]}, ", "containers: ["+web+"]"),
			want: `spec.endpoint.ports[0].targetPort: "https" names no container port of the pod`},
		{name: "service target port protocol matches", kind: "Service",
			good: svcSpec("endpoint: {ports: [{port: 53, protocol: udp, targetPort: dns}]}, ", "containers: [{name: d, image: n, ports: [{name: dns, containerPort: 53, protocol: udp}]}]"),
			bad:  svcSpec("endpoint: {ports: [{port: 53, protocol: udp, targetPort: dns}]}, ", "containers: [{name: d, image: n, ports: [{name: dns, containerPort: 53}]}]"),
			want: `spec.endpoint.ports[0].targetPort: "dns" is a tcp port, the service port is udp`},
		{name: "container port names unique across the pod", kind: "Service",
			good: svcSpec("", "containers: ["+web+", {name: b, image: n, ports: [{name: admin, containerPort: 81}]}]"),
			bad:  svcSpec("", "containers: ["+web+", {name: b, image: n, ports: [{name: http, containerPort: 81}]}]"),
			want: `spec.pod.containers[1].ports[0].name: "http" is already the name of spec.pod.containers[0].ports[0]`},
		{name: "container port numbers unique across the pod", kind: "Service",
			good: svcSpec("", "containers: ["+web+", {name: b, image: n, ports: [{containerPort: 80, protocol: udp}]}]"),
			bad:  svcSpec("", "containers: ["+web+", {name: b, image: n, ports: [{containerPort: 80}]}]"),
			want: "spec.pod.containers[1].ports[0].containerPort: 80/tcp is already spec.pod.containers[0].ports[0]"},
		{name: "container port range", kind: "Service",
			good: svcSpec("", "containers: [{name: a, image: n, ports: [{containerPort: 65535}]}]"),
			bad:  svcSpec("", "containers: [{name: a, image: n, ports: [{containerPort: 65536}]}]"),
			want: "spec.pod.containers[0].ports[0].containerPort: 65536 is out of range: expected 1 to 65535"},
		{name: "service ports unique", kind: "Service",
			good: svcSpec("endpoint: {ports: [{port: 80}, {port: 443}]}, ", "containers: ["+web+"]"),
			bad:  svcSpec("endpoint: {ports: [{port: 80}, {port: 80}]}, ", "containers: ["+web+"]"),
			want: "spec.endpoint.ports[1].port: 80/tcp is already ports[0]"},
		{name: "published ports unique", kind: "Service",
			good: svcSpec("endpoint: {ports: [{port: 80, publish: ingress}, {port: 443, publish: ingress}]}, ", "containers: ["+web+"]"),
			bad:  svcSpec("endpoint: {ports: [{port: 80, publish: ingress, publishedPort: 8080}, {port: 443, publish: host, publishedPort: 8080}]}, ", "containers: ["+web+"]"),
			want: "spec.endpoint.ports[1].publishedPort: 8080/tcp is already published by ports[0]"},
		{name: "published port needs publish", kind: "Service",
			good: svcSpec("endpoint: {ports: [{port: 80, publish: host, publishedPort: 8080}]}, ", "containers: ["+web+"]"),
			bad:  svcSpec("endpoint: {ports: [{port: 80, publishedPort: 8080}]}, ", "containers: ["+web+"]"),
			want: "spec.endpoint.ports[0].publishedPort: set without publish"},
		{name: "dnsrr cannot publish on ingress", kind: "Service",
			good: svcSpec("endpoint: {mode: dnsrr, ports: [{port: 80, publish: host}]}, ", "containers: ["+web+"]"),
			bad:  svcSpec("endpoint: {mode: dnsrr, ports: [{port: 80, publish: ingress}]}, ", "containers: ["+web+"]"),
			want: "spec.endpoint.ports[0].publish: ingress publishing needs a VIP"},
		// Mounts name a pod volume and no target twice.
		{name: "mount names a pod volume", kind: "Service",
			good: svcSpec("", "containers: [{name: a, image: n, volumeMounts: [{name: data, path: /data}]}], volumes: [{name: data, tmpfs: {}}]"),
			bad:  svcSpec("", "containers: [{name: a, image: n, volumeMounts: [{name: dta, path: /data}]}], volumes: [{name: data, tmpfs: {}}]"),
			want: `spec.pod.containers[0].volumeMounts[0].name: "dta" names no volume of the pod`},
		{name: "no target mounted twice", kind: "Service",
			good: svcSpec("", "containers: [{name: a, image: n, volumeMounts: [{name: d, path: /data}], secrets: [{name: s}]}], volumes: [{name: d, tmpfs: {}}]"),
			bad:  svcSpec("", "containers: [{name: a, image: n, volumeMounts: [{name: d, path: /run/secrets/s/}], secrets: [{name: s}]}], volumes: [{name: d, tmpfs: {}}]"),
			want: `spec.pod.containers[0].secrets[0].target: "/run/secrets/s" is already the target of spec.pod.containers[0].volumeMounts[0].path`},
		{name: "mount paths are absolute without ..", kind: "Service",
			good: svcSpec("", "containers: [{name: a, image: n, volumeMounts: [{name: d, path: /var/x}]}], volumes: [{name: d, tmpfs: {}}]"),
			bad:  svcSpec("", "containers: [{name: a, image: n, volumeMounts: [{name: d, path: /var/../etc}]}], volumes: [{name: d, tmpfs: {}}]"),
			want: `spec.pod.containers[0].volumeMounts[0].path: "/var/../etc": a path may not climb with '..'`},
		{name: "pod volume has one source", kind: "Service",
			good: svcSpec("", "containers: [{name: a, image: n}], volumes: [{name: d, volume: {name: v}}]"),
			bad:  svcSpec("", "containers: [{name: a, image: n}], volumes: [{name: d, volume: {name: v}, tmpfs: {}}]"),
			want: "spec.pod.volumes[0]: expected exactly one of volume, claim, tmpfs or hostPath, got 2"},
		{name: "claims only in stateful services", kind: "Service",
			good: svcSpec("mode: stateful, ", "containers: [{name: a, image: n}], volumes: [{name: d, claim: {size: 1Gi}}]"),
			bad:  svcSpec("", "containers: [{name: a, image: n}], volumes: [{name: d, claim: {size: 1Gi}}]"),
			want: "spec.pod.volumes[0].claim: only a stateful service's pod claims volumes"},
		// Requests within limits.
		{name: "cpu request within limit", kind: "Service",
			good: svcSpec("", "containers: [{name: a, image: n, resources: {requests: {cpu: 1}, limits: {cpu: 1000m}}}]"),
			bad:  svcSpec("", "containers: [{name: a, image: n, resources: {requests: {cpu: 1.5}, limits: {cpu: 1}}}]"),
			want: "spec.pod.containers[0].resources.requests.cpu: 1500m is above the limit 1"},
		{name: "memory request within limit", kind: "Service",
			good: svcSpec("", "containers: [{name: a, image: n, resources: {requests: {memory: 512Mi}}}]"),
			bad:  svcSpec("", "containers: [{name: a, image: n, resources: {requests: {memory: 1Gi}, limits: {memory: 512Mi}}}]"),
			want: "spec.pod.containers[0].resources.requests.memory: 1Gi is above the limit 512Mi"},
		// Placement.
		{name: "constraints parse", kind: "Service",
			good: svcSpec("placement: {constraints: ['node.platform.os == freebsd']}, ", "containers: [{name: a, image: n}]"),
			bad:  svcSpec("placement: {constraints: ['node.zone == a']}, ", "containers: [{name: a, image: n}]"),
			want: `spec.placement.constraints[0]: constraint "node.zone == a": unknown attribute "node.zone"`},
		{name: "spread names a node label", kind: "Service",
			good: svcSpec("placement: {preferences: [{spread: node.labels.zone}]}, ", "containers: [{name: a, image: n}]"),
			bad:  svcSpec("placement: {preferences: [{spread: zone}]}, ", "containers: [{name: a, image: n}]"),
			want: `spec.placement.preferences[0].spread: "zone": expected node.labels.<key>`},
		{name: "toleration effect", kind: "Service",
			good: svcSpec("placement: {tolerations: [{key: gpu, effect: NoExecute}]}, ", "containers: [{name: a, image: n}]"),
			bad:  svcSpec("placement: {tolerations: [{key: gpu, effect: NoRun}]}, ", "containers: [{name: a, image: n}]"),
			want: `spec.placement.tolerations[0].effect: "NoRun" is not valid`},
		{name: "affinity is a preference only", kind: "Service",
			good: svcSpec("placement: {antiAffinity: [{services: {app: db}, required: true}]}, ", "containers: [{name: a, image: n}]"),
			bad:  svcSpec("placement: {affinity: [{services: {app: db}, required: true}]}, ", "containers: [{name: a, image: n}]"),
			want: "spec.placement.affinity[0].required: affinity is a preference only"},
		// Modes, updates, autoscale.
		{name: "global services have no replicas", kind: "Service",
			good: svcSpec("mode: global, ", "containers: [{name: a, image: n}]"),
			bad:  svcSpec("mode: global, replicas: 2, ", "containers: [{name: a, image: n}]"),
			want: "spec.replicas: not allowed for a global service"},
		{name: "stateful refuses start-first", kind: "Service",
			good: svcSpec("mode: stateful, update: {order: stop-first}, ", "containers: [{name: a, image: n}]"),
			bad:  svcSpec("mode: stateful, update: {order: start-first}, ", "containers: [{name: a, image: n}]"),
			want: "spec.update.order: start-first is refused for a stateful service"},
		{name: "snapshots are for stateful services", kind: "Service",
			good: svcSpec("mode: stateful, update: {snapshot: true}, ", "containers: [{name: a, image: n}]"),
			bad:  svcSpec("update: {snapshot: true}, ", "containers: [{name: a, image: n}]"),
			want: "spec.update.snapshot: only a stateful service"},
		{name: "autoscale needs a target", kind: "Service",
			good: svcSpec("autoscale: {min: 1, max: 3, cpu: 70}, ", "containers: [{name: a, image: n, resources: {requests: {cpu: 100m}}}]"),
			bad:  svcSpec("autoscale: {min: 1, max: 3}, ", "containers: [{name: a, image: n, resources: {requests: {cpu: 100m}}}]"),
			want: "spec.autoscale: needs a target"},
		{name: "autoscale min within max", kind: "Service",
			good: svcSpec("autoscale: {min: 2, max: 2, cpu: 70}, ", "containers: [{name: a, image: n, resources: {requests: {cpu: 100m}}}]"),
			bad:  svcSpec("autoscale: {min: 3, max: 2, cpu: 70}, ", "containers: [{name: a, image: n, resources: {requests: {cpu: 100m}}}]"),
			want: "spec.autoscale.max: 2 is below min 3"},
		{name: "autoscale min at least 1", kind: "Service",
			good: svcSpec("autoscale: {min: 1, max: 2, cpu: 70}, ", "containers: [{name: a, image: n, resources: {requests: {cpu: 100m}}}]"),
			bad:  svcSpec("autoscale: {min: 0, max: 2, cpu: 70}, ", "containers: [{name: a, image: n, resources: {requests: {cpu: 100m}}}]"),
			want: "spec.autoscale.min: 0 is out of range"},
		{name: "replicas within autoscale", kind: "Service",
			good: svcSpec("replicas: 3, autoscale: {min: 1, max: 3, memory: 80}, ", "containers: [{name: a, image: n, resources: {requests: {memory: 1Gi}}}]"),
			bad:  svcSpec("replicas: 4, autoscale: {min: 1, max: 3, memory: 80}, ", "containers: [{name: a, image: n, resources: {requests: {memory: 1Gi}}}]"),
			want: "spec.replicas: 4 is outside autoscale's 1 to 3"},
		{name: "autoscale target needs the request", kind: "Service",
			good: svcSpec("autoscale: {min: 1, max: 3, memory: 80}, ", "containers: [{name: a, image: n, resources: {requests: {memory: 1Gi}}}]"),
			bad:  svcSpec("autoscale: {min: 1, max: 3, memory: 80}, ", "containers: [{name: a, image: n, resources: {requests: {cpu: 1}}}]"),
			want: "spec.pod.containers[0].resources.requests.memory: missing: autoscale's memory target"},
		{name: "only replicated services autoscale", kind: "Service",
			good: svcSpec("autoscale: {min: 1, max: 3, cpu: 50}, ", "containers: [{name: a, image: n, resources: {requests: {cpu: 1}}}]"),
			bad:  svcSpec("mode: stateful, autoscale: {min: 1, max: 3, cpu: 50}, ", "containers: [{name: a, image: n, resources: {requests: {cpu: 1}}}]"),
			want: "spec.autoscale: only a replicated service autoscales"},
		// Containers.
		{name: "env has one source", kind: "Service",
			good: svcSpec("", "containers: [{name: a, image: n, env: [{name: X, secret: s}]}]"),
			bad:  svcSpec("", "containers: [{name: a, image: n, env: [{name: X, value: v, secret: s}]}]"),
			want: "spec.pod.containers[0].env[0]: expected one of value, secret or config"},
		{name: "env names unique", kind: "Service",
			good: svcSpec("", "containers: [{name: a, image: n, env: [{name: X, value: 1}, {name: Y, value: 2}]}]"),
			bad:  svcSpec("", "containers: [{name: a, image: n, env: [{name: X, value: 1}, {name: X, value: 2}]}]"),
			want: `spec.pod.containers[0].env[1].name: "X" is already env[0]`},
		{name: "container names unique across init and main", kind: "Service",
			good: svcSpec("", "initContainers: [{name: init, image: n}], containers: [{name: a, image: n}]"),
			bad:  svcSpec("", "initContainers: [{name: a, image: n}], containers: [{name: a, image: n}]"),
			want: `spec.pod.containers[0].name: "a" is already the name of spec.pod.initContainers[0]`},
		{name: "a pod has containers", kind: "Service",
			good: svcSpec("", "containers: [{name: a, image: n}]"),
			bad:  svcSpec("", "initContainers: [{name: a, image: n}]"),
			want: "spec.pod.containers: missing: a pod needs at least one container"},
		{name: "working directory is absolute", kind: "Service",
			good: svcSpec("", "containers: [{name: a, image: n, workingDir: /srv}]"),
			bad:  svcSpec("", "containers: [{name: a, image: n, workingDir: srv}]"),
			want: `spec.pod.containers[0].workingDir: "srv": expected an absolute path`},
		{name: "security allow names", kind: "Service",
			good: svcSpec("", "containers: [{name: a, image: n, security: {allow: [rawSockets, mlock]}}]"),
			bad:  svcSpec("", "containers: [{name: a, image: n, security: {allow: [rawsockets]}}]"),
			want: `spec.pod.containers[0].security.allow[0]: "rawsockets" is not valid`},
		{name: "securelevel range", kind: "Service",
			good: svcSpec("", "containers: [{name: a, image: n, security: {securelevel: -1}}]"),
			bad:  svcSpec("", "containers: [{name: a, image: n, security: {securelevel: 4}}]"),
			want: "spec.pod.containers[0].security.securelevel: 4 is out of range: expected -1 to 3"},
		{name: "enforceStatfs is 1 or 2", kind: "Service",
			good: svcSpec("", "containers: [{name: a, image: n, security: {enforceStatfs: 1}}]"),
			bad:  svcSpec("", "containers: [{name: a, image: n, security: {enforceStatfs: 0}}]"),
			want: "spec.pod.containers[0].security.enforceStatfs: 0 is out of range: expected 1 to 2"},
		{name: "stop signal", kind: "Service",
			good: svcSpec("", "containers: [{name: a, image: n, stopSignal: SIGQUIT}]"),
			bad:  svcSpec("", "containers: [{name: a, image: n, stopSignal: SIGFOO}]"),
			want: `spec.pod.containers[0].stopSignal: "SIGFOO"`},
		{name: "stateful pods take no fixed hostname", kind: "Service",
			good: svcSpec("", "containers: [{name: a, image: n}], hostname: box"),
			bad:  svcSpec("mode: stateful, ", "containers: [{name: a, image: n}], hostname: box"),
			want: "spec.pod.hostname: a stateful service's tasks are named"},
		// Jobs and cron jobs.
		{name: "job restart never any", kind: "Job",
			good: svcSpec("", "containers: [{name: a, image: n}], restartPolicy: {condition: on-failure}"),
			bad:  svcSpec("", "containers: [{name: a, image: n}], restartPolicy: {condition: any}"),
			want: "spec.pod.restartPolicy.condition: a Job's tasks may not restart on any exit"},
		{name: "only services' tasks are restarted", kind: "Job",
			good: svcSpec("", "containers: [{name: a, image: n}]"),
			bad:  svcSpec("", "containers: [{name: a, image: n}], restartedAt: '2026-12-05T07:00:00Z'"),
			want: "spec.pod.restartedAt: not allowed for a Job"},
		{name: "a service's tasks are restarted", kind: "Service",
			good: svcSpec("", "containers: [{name: a, image: n}], restartedAt: '2026-12-05T07:00:00Z'"),
			bad:  svcSpec("", "containers: [{name: a, image: n}], restartedAt: yesterday"),
			want: "restartedAt"},
		{name: "global jobs have no completions", kind: "Job",
			good: svcSpec("mode: global, ", "containers: [{name: a, image: n}]"),
			bad:  svcSpec("mode: global, completions: 3, ", "containers: [{name: a, image: n}]"),
			want: "spec.completions: not allowed for a global job"},
		{name: "completions limit", kind: "Job",
			good: svcSpec("completions: 65536, ", "containers: [{name: a, image: n}]"),
			bad:  svcSpec("completions: 65537, ", "containers: [{name: a, image: n}]"),
			want: "spec.completions: 65537 is out of range: expected 1 to 65536"},
		{name: "parallelism limit", kind: "Job",
			good: svcSpec("parallelism: 65536, ", "containers: [{name: a, image: n}]"),
			bad:  svcSpec("parallelism: 65537, ", "containers: [{name: a, image: n}]"),
			want: "spec.parallelism: 65537 is out of range: expected 1 to 65536"},
		{name: "cron schedule has five fields", kind: "CronJob",
			good: "{schedule: '0 3 * * 1-5', job: {pod: {containers: [{name: a, image: n}]}}}",
			bad:  "{schedule: '0 0 3 * * 1-5', job: {pod: {containers: [{name: a, image: n}]}}}",
			want: `spec.schedule: "0 0 3 * * 1-5"`},
		{name: "cron schedules are UTC", kind: "CronJob",
			good: "{schedule: '0 3 * * *', job: {pod: {containers: [{name: a, image: n}]}}}",
			bad:  "{schedule: 'TZ=Europe/Paris 0 3 * * *', job: {pod: {containers: [{name: a, image: n}]}}}",
			want: "schedules are in UTC"},
		{name: "cron job's job is checked", kind: "CronJob",
			good: "{schedule: '@@', job: {pod: {containers: [{name: a, image: n}]}}}",
			bad:  "{schedule: '0 3 * * *', job: {pod: {containers: [{name: a, image: n}], restartPolicy: {condition: any}}}}",
			want: "spec.job.pod.restartPolicy.condition", goodN: "skip"},
		{name: "cron job name at most 52", kind: "CronJob",
			good: "{schedule: '0 3 * * *', job: {pod: {containers: [{name: a, image: n}]}}}",
			bad:  "{schedule: '0 3 * * *', job: {pod: {containers: [{name: a, image: n}]}}}",
			want: "at most 52 allowed for a CronJob", goodN: strings.Repeat("c", 52), badN: strings.Repeat("c", 53)},
		// Values, volumes, namespaces, nodes.
		{name: "secret value at most 500 KiB", kind: "Secret",
			good: "{text: " + big + "}", bad: "{text: " + big + "b}",
			want: "spec.data: 512001 bytes is over the limit of 512000 (500 KiB)"},
		{name: "secret has data or text, not both", kind: "Config",
			good: "{data: aGk=}", bad: "{data: aGk=, text: hi}",
			want: "spec: expected one of data (base64) or text, got both"},
		{name: "secret value missing", kind: "Secret",
			good: "{text: x}", bad: "{}", want: "spec.data: missing"},
		{name: "nfs volume needs a server", kind: "Volume",
			good: "{driver: nfs, nfs: {server: nas, path: /x}}", bad: "{driver: nfs, nfs: {path: /x}}",
			want: "spec.nfs.server: missing"},
		{name: "only zfs volumes have a size", kind: "Volume",
			good: "{size: 10Gi}", bad: "{driver: nfs, size: 10Gi, nfs: {server: nas, path: /x}}",
			want: "spec.size: only a zfs volume has a size"},
		{name: "driver settings match the driver", kind: "Volume",
			good: "{driver: iscsi, iscsi: {portal: 127.0.0.1, target: iqn.x, lun: 0}}", bad: "{iscsi: {portal: 127.0.0.1, target: iqn.x}}",
			want: "spec.iscsi: given for a zfs volume"},
		{name: "plugin volumes name a plugin", kind: "Volume",
			good: "{driver: plugin, plugin: {name: ceph, shared: true}}", bad: "{driver: plugin, plugin: {name: ../bin/sh}}",
			want: "spec.plugin.name"},
		{name: "namespace allow-list names", kind: "Namespace",
			good: "{security: {allow: [securelevel, enforceStatfs, rawSockets]}}", bad: "{security: {allow: [mount]}}",
			want: `spec.security.allow[0]: "mount" is not valid`},
		{name: "namespace tolerations", kind: "Namespace",
			good: "{security: {tolerations: [{key: dedicated, value: shop, effect: NoSchedule}]}}", bad: "{security: {tolerations: [{value: shop, effect: Never}]}}",
			want: `spec.security.tolerations[0].effect: "Never" is not valid`},
		{name: "namespace isolation", kind: "Namespace",
			good: "{isolation: locked}", bad: "{isolation: closed}",
			want: `spec.isolation: "closed" is not valid: expected one of namespace, open, locked`},
		{name: "taints have an effect", kind: "Node",
			good: "{taints: [{key: gpu, effect: NoSchedule}]}", bad: "{taints: [{key: gpu}]}",
			want: "spec.taints[0].effect: missing"},
		{name: "taints unique", kind: "Node",
			good: "{taints: [{key: gpu, effect: NoSchedule}, {key: gpu, effect: NoExecute}]}", bad: "{taints: [{key: gpu, effect: NoSchedule}, {key: gpu, value: x, effect: NoSchedule}]}",
			want: "spec.taints[1]: taint gpu:NoSchedule is already taints[0]"},
		// Policies, routes, bindings, image policies.
		{name: "egress networks are IPv4", kind: "NetworkPolicy",
			good: "{egress: [{to: [{cidr: 10.1.2.3/16}]}]}", bad: "{egress: [{to: [{cidr: 'fd00::/8'}]}]}",
			want: `spec.egress[0].to[0].cidr: "fd00::/8": only IPv4 networks`},
		{name: "egress peer is a network or tasks", kind: "NetworkPolicy",
			good: "{egress: [{to: [{namespace: db}]}]}", bad: "{egress: [{to: [{namespace: db, cidr: 10.0.0.0/8}]}]}",
			want: "spec.egress[0].to[0]: expected either cidr or namespace and services, got both"},
		{name: "policy ports", kind: "NetworkPolicy",
			good: "{ingress: [{ports: [{port: 5432}]}]}", bad: "{ingress: [{ports: [{port: 0, protocol: udp}]}]}",
			want: "spec.ingress[0].ports[0].port: missing"},
		{name: "acme cannot do wildcards", kind: "Route",
			good: "{host: '*.example.org', service: web, tls: {secret: wild}}", bad: "{host: '*.example.org', service: web, tls: {secret: wild, acme: {email: a@b.c}}}",
			want: "spec.tls.acme: a wildcard host needs a DNS challenge"},
		{name: "acme directory is https", kind: "Route",
			good: "{host: a.example.org, service: web, tls: {secret: s, acme: {email: a@b.c, directory: 'http://127.0.0.1:14000/dir'}}}",
			bad:  "{host: a.example.org, service: web, tls: {secret: s, acme: {email: a@b.c, directory: 'http://acme.example.org/dir'}}}",
			want: "spec.tls.acme.directory"},
		{name: "route host", kind: "Route",
			good: "{host: shop.example.org, service: web}", bad: "{host: 'shop..example.org', service: web}",
			want: `spec.host: "shop..example.org": expected a host name`},
		{name: "route path", kind: "Route",
			good: "{host: a.b, path: /shop, service: web}", bad: "{host: a.b, path: /shop/../admin, service: web}",
			want: "spec.path"},
		{name: "route trusted proxies", kind: "Route",
			good: "{host: a.b, service: web, trustedProxies: [10.0.0.0/8, 192.0.2.7]}", bad: "{host: a.b, service: web, trustedProxies: [lb.example.org]}",
			want: `spec.trustedProxies[0]: "lb.example.org": expected an address or a CIDR`},
		{name: "route proxy protocol", kind: "Route",
			good: "{host: a.b, service: web, proxyProtocol: v2}", bad: "{host: a.b, service: web, proxyProtocol: v3}",
			want: `spec.proxyProtocol: "v3": expected v1 or v2`},
		{name: "role binding role", kind: "RoleBinding",
			good: "{user: alice, role: admin}", bad: "{user: alice, role: root}",
			want: `spec.role: "root" is not valid: expected one of view, edit, admin`},
		{name: "image policy patterns name the registry", kind: "ImagePolicy",
			good: "{repositories: [ghcr.io/acme/**], keys: [" + jsonKey + "]}", bad: "{repositories: [acme/**], keys: [" + jsonKey + "]}",
			want: `spec.repositories[0]: "acme/**": the first segment must name the registry`},
		{name: "image policy patterns take no tag", kind: "ImagePolicy",
			good: "{repositories: ['localhost:5000/app-*'], keys: [" + jsonKey + "]}", bad: "{repositories: ['localhost:5000/app:1.0'], keys: [" + jsonKey + "]}",
			want: "without a tag"},
		{name: "image policy keys are P-256", kind: "ImagePolicy",
			good: "{repositories: [docker.io/library/nginx], keys: [" + jsonKey + "]}", bad: "{repositories: [docker.io/library/nginx], keys: [not a key]}",
			want: "spec.keys[0]: not a PEM public key"},
		// Limits on counts and names.
		{name: "replicas limit", kind: "Service",
			good: svcSpec("replicas: 65536, ", "containers: [{name: a, image: n}]"),
			bad:  svcSpec("replicas: 65537, ", "containers: [{name: a, image: n}]"),
			want: "spec.replicas: 65537 is out of range: expected 0 to 65536"},
		{name: "autoscale max limit", kind: "Service",
			good: svcSpec("autoscale: {min: 1, max: 65536, cpu: 50}, ", "containers: [{name: a, image: n, resources: {requests: {cpu: 1}}}]"),
			bad:  svcSpec("autoscale: {min: 1, max: 65537, cpu: 50}, ", "containers: [{name: a, image: n, resources: {requests: {cpu: 1}}}]"),
			want: "spec.autoscale.max: 65537 is out of range: at most 65536"},
		{name: "update parallelism limit", kind: "Service",
			good: svcSpec("update: {parallelism: 0}, ", "containers: [{name: a, image: n}]"),
			bad:  svcSpec("update: {parallelism: 65537}, ", "containers: [{name: a, image: n}]"),
			want: "spec.update.parallelism: 65537 is out of range"},
		{name: "names are DNS labels", kind: "Secret",
			good: "{text: x}", bad: "{text: x}", want: `metadata.name: "Web_1" is not a DNS label`, badN: "Web_1"},
		{name: "names at most 63 characters", kind: "Secret",
			good: "{text: x}", bad: "{text: x}", want: "at most 63 allowed", goodN: strings.Repeat("n", 63), badN: strings.Repeat("n", 64)},
		{name: "container names are DNS labels", kind: "Service",
			good: svcSpec("", "containers: [{name: a-1, image: n}]"), bad: svcSpec("", "containers: [{name: A_1, image: n}]"),
			want: `spec.pod.containers[0].name: "A_1" is not a DNS label`},
		{name: "pull secret names", kind: "Service",
			good: svcSpec("", "containers: [{name: a, image: n}], imagePullSecrets: [login]"),
			bad:  svcSpec("", "containers: [{name: a, image: n}], imagePullSecrets: [login, login]"),
			want: `spec.pod.imagePullSecrets[1]: "login" is listed twice`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			goodN, badN := c.goodN, c.badN
			if goodN == "" {
				goodN = "x"
			}
			if badN == "" {
				badN = "x"
			}
			if goodN != "skip" {
				if errs := errorsOf(t, manifest(c.kind, goodN, c.good)); errs != nil {
					t.Errorf("the passing case was refused: %q", errs)
				}
			}
			errs := errorsOf(t, manifest(c.kind, badN, c.bad))
			if !hasError(errs, c.want) {
				t.Errorf("want an error containing %q, got %q", c.want, errs)
			}
		})
	}
}

func TestScopeLabelsAndTasks(t *testing.T) {
	t.Parallel()
	if errs := errorsOf(t, "apiVersion: legion/v1\nkind: Namespace\nmetadata: {name: shop, namespace: x}\nspec: {}\n"); !hasError(errs, "metadata.namespace: Namespace is cluster-scoped") {
		t.Errorf("a namespaced Namespace: %q", errs)
	}
	if errs := errorsOf(t, "apiVersion: legion/v1\nkind: Secret\nmetadata: {name: s, labels: {'-bad': x}}\nspec: {text: x}\n"); !hasError(errs, "metadata.labels.-bad: invalid label key") {
		t.Errorf("a bad label key: %q", errs)
	}
	if errs := errorsOf(t, "apiVersion: legion/v1\nkind: Secret\nmetadata: {name: s, labels: {legion.stack: a b}}\nspec: {text: x}\n"); !hasError(errs, "metadata.labels.legion.stack: invalid label value") {
		t.Errorf("a bad label value: %q", errs)
	}
	if errs := errorsOf(t, "apiVersion: legion/v1\nkind: Secret\nmetadata: {name: s, labels: {example.org/tier: front, legion.stack: shop}}\nspec: {text: x}\n"); errs != nil {
		t.Errorf("good labels refused: %q", errs)
	}
	if errs := errorsOf(t, "apiVersion: legion/v1\nkind: Task\nmetadata: {name: t}\nspec: {}\n"); !hasError(errs, "Task objects are written by Legion only") {
		t.Errorf("a Task from a user: %q", errs)
	}
}
