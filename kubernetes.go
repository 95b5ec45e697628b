package legion

import (
	"regexp"
	"strings"
)

// kubernetesKind is the kind of Legion's that stands for one of
// Kubernetes', and how it does.
type kubernetesKind struct {
	kind Kind
	as   string
}

// kubernetesKinds are Kubernetes' kinds a kubectl user names by habit,
// by their lower-case singular and kubectl's short names.
var kubernetesKinds = map[string]kubernetesKind{
	"pod":                     {KindTask, "a pod is a task's, which Legion makes from a Service or Job"},
	"po":                      {KindTask, "a pod is a task's, which Legion makes from a Service or Job"},
	"deployment":              {KindService, "a Deployment is a Service here"},
	"deploy":                  {KindService, "a Deployment is a Service here"},
	"replicaset":              {KindService, "a ReplicaSet is a Service here"},
	"rs":                      {KindService, "a ReplicaSet is a Service here"},
	"statefulset":             {KindService, "a StatefulSet is a Service of mode stateful here"},
	"sts":                     {KindService, "a StatefulSet is a Service of mode stateful here"},
	"daemonset":               {KindService, "a DaemonSet is a Service of mode global here"},
	"ds":                      {KindService, "a DaemonSet is a Service of mode global here"},
	"configmap":               {KindConfig, "a ConfigMap is a Config here"},
	"cm":                      {KindConfig, "a ConfigMap is a Config here"},
	"ingress":                 {KindRoute, "an Ingress is a Route here"},
	"ingresses":               {KindRoute, "an Ingress is a Route here"},
	"ing":                     {KindRoute, "an Ingress is a Route here"},
	"persistentvolumeclaim":   {KindVolume, "a PersistentVolumeClaim is a Volume here"},
	"pvc":                     {KindVolume, "a PersistentVolumeClaim is a Volume here"},
	"persistentvolume":        {KindVolume, "a PersistentVolume is a Volume here"},
	"pv":                      {KindVolume, "a PersistentVolume is a Volume here"},
	"horizontalpodautoscaler": {KindService, "a HorizontalPodAutoscaler is a Service's spec.autoscale here (legion autoscale)"},
	"hpa":                     {KindService, "a HorizontalPodAutoscaler is a Service's spec.autoscale here (legion autoscale)"},
}

// KubernetesKind says which of Legion's kinds stands for a Kubernetes
// kind named as kubectl takes it (any case; singular, plural or short),
// and how, for messages that refuse the name; ok is false for any other.
func KubernetesKind(name string) (kind Kind, how string, ok bool) {
	l := strings.ToLower(name)
	k, ok := kubernetesKinds[l]
	if !ok {
		k, ok = kubernetesKinds[strings.TrimSuffix(l, "s")]
	}
	return k.kind, k.as, ok
}

// kubernetesFields are fields of Kubernetes' workload kinds that a
// manifest written for them has, by their path in a Legion object, with
// where the same thing is said here.
var kubernetesFields = map[string]string{
	"spec.template":             "Kubernetes' spec.template.spec is spec.pod here",
	"spec.selector":             "a Service's or Job's tasks are its own, so it has no selector (its labels go in metadata.labels)",
	"spec.strategy":             "a Service's rolling update is spec.update here (parallelism, order, failureAction)",
	"spec.serviceName":          "a stateful Service is its own DNS name (spec.mode: stateful)",
	"spec.volumeClaimTemplates": "a stateful Service's claim is a pod volume's here (spec.pod.volumes[].claim: {size})",
	"spec.jobTemplate":          "Kubernetes' spec.jobTemplate.spec is spec.job here",
	"spec.ports":                "a Service's ports are spec.endpoint.ports here",
	"spec.type":                 "a Service's ports are published by spec.endpoint.ports[].publish here",
	// A container's, in any pod (indexes and init containers aside).
	"spec.pod.containers.livenessProbe":          "a container's probes are probes.liveness, probes.readiness and probes.startup here",
	"spec.pod.containers.readinessProbe":         "a container's probes are probes.liveness, probes.readiness and probes.startup here",
	"spec.pod.containers.startupProbe":           "a container's probes are probes.liveness, probes.readiness and probes.startup here",
	"spec.pod.containers.imagePullPolicy":        "it is pullPolicy here (always, if-not-present, never)",
	"spec.pod.containers.securityContext":        "a container's jail settings are security here",
	"spec.pod.containers.volumeMounts.mountPath": "a mount's path is path here",
	"spec.pod.containers.env.valueFrom":          "a variable's value from a Secret or Config is env[].secret or env[].config here",
}

// kubernetesFieldHint is what an unknown field at path is here, when a
// Kubernetes manifest has it ("" otherwise), for the refusal. A
// container's fields are matched in any pod: a Job's (spec.pod), a
// CronJob's (spec.job.pod), init containers too.
func kubernetesFieldHint(path string) string {
	key := indexes.ReplaceAllString(path, "")
	key = strings.Replace(key, "spec.job.pod.", "spec.pod.", 1)
	key = strings.Replace(key, ".initContainers.", ".containers.", 1)
	if h, ok := kubernetesFields[key]; ok {
		return ": " + h
	}
	return ""
}

// indexes are a path's list indexes ("[0]").
var indexes = regexp.MustCompile(`\[[0-9]+\]`)
