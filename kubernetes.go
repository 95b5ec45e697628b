package legion

import "strings"

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
