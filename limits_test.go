package legion

import (
	"fmt"
	"strings"
	"testing"
)

func limitService(edit func(s *Service)) *Service {
	s := &Service{Header: Header{APIVersion: APIVersion, Kind: KindService, Metadata: Metadata{Name: "web", Namespace: "shop"}}}
	s.Spec.Pod.Containers = []Container{{Name: "web", Image: "registry.example/shop/web:1.4"}}
	edit(s)
	return s
}

func manyLabels(n int) map[string]string {
	m := make(map[string]string, n)
	for i := range n {
		m[fmt.Sprintf("k%d", i)] = "v"
	}
	return m
}

func containers(n int) []Container {
	out := make([]Container, n)
	for i := range out {
		out[i] = Container{Name: fmt.Sprintf("c%d", i), Image: "nginx"}
	}
	return out
}

// Every limit on what a user writes: the object at the limit passes, one
// past it is refused with the field and the limit named.
func TestLimitsRefuseWithTheLimitNamed(t *testing.T) {
	t.Parallel()
	env := func(n int, value string) []EnvVar {
		out := make([]EnvVar, n)
		for i := range out {
			out[i] = EnvVar{Name: fmt.Sprintf("V%d", i), Value: value}
		}
		return out
	}
	digest := "@sha256:" + strings.Repeat("a", 64)
	cases := []struct {
		name      string
		good, bad func(s *Service)
		want      string
	}{
		{"labels",
			func(s *Service) { s.Metadata.Labels = manyLabels(MaxLabels) },
			func(s *Service) { s.Metadata.Labels = manyLabels(100_000) },
			"metadata.labels: 100000 labels, at most 64 allowed"},
		{"label value length",
			func(s *Service) { s.Metadata.Labels = map[string]string{"a": strings.Repeat("v", MaxLabelValue)} },
			func(s *Service) { s.Metadata.Labels = map[string]string{"a": strings.Repeat("v", 100_000)} },
			"metadata.labels.a: invalid label value 100000 characters, at most 63 allowed"},
		{"label key length",
			func(s *Service) {
				s.Metadata.Labels = map[string]string{strings.Repeat("p", MaxLabelName) + ".org/" + strings.Repeat("n", MaxLabelName): "v"}
			},
			func(s *Service) { s.Metadata.Labels = map[string]string{strings.Repeat("k", 5000): "v"} },
			"invalid label key 5000 characters, at most 317 allowed"},
		{"selector labels",
			func(s *Service) { s.Spec.Placement.AntiAffinity = []AffinityTerm{{Services: manyLabels(MaxLabels)}} },
			func(s *Service) {
				s.Spec.Placement.AntiAffinity = []AffinityTerm{{Services: manyLabels(MaxLabels + 1)}}
			},
			"spec.placement.antiAffinity[0].services: 65 labels, at most 64 allowed"},
		{"env count",
			func(s *Service) { s.Spec.Pod.Containers[0].Env = env(MaxEnv, "") },
			func(s *Service) { s.Spec.Pod.Containers[0].Env = env(MaxEnv+1, "") },
			"spec.pod.containers[0].env: 1025 variables, at most 1024 allowed"},
		{"env size",
			func(s *Service) {
				s.Spec.Pod.Containers[0].Env = env(1, strings.Repeat("x", MaxExecBytes-len("V0=")-1))
			},
			func(s *Service) { s.Spec.Pod.Containers[0].Env = env(1, strings.Repeat("x", 600_000)) },
			"spec.pod.containers[0]: command, args and env take 600004 bytes, at most 262144 allowed"},
		{"args count",
			func(s *Service) { s.Spec.Pod.Containers[0].Args = make([]string, MaxArgs) },
			func(s *Service) { s.Spec.Pod.Containers[0].Args = make([]string, MaxArgs+1) },
			"spec.pod.containers[0].args: 1025 arguments, at most 1024 allowed"},
		{"image grammar",
			func(s *Service) { s.Spec.Pod.Containers[0].Image = "localhost:5000/a/b:c" + digest },
			func(s *Service) { s.Spec.Pod.Containers[0].Image = "a:b:c@sha256:zz" },
			`spec.pod.containers[0].image: "a:b:c@sha256:zz" is not an image reference`},
		{"image reference length",
			func(s *Service) {
				s.Spec.Pod.Containers[0].Image = strings.Repeat("a", MaxImageName) + ":" + strings.Repeat("t", MaxImageTag)
			},
			func(s *Service) { s.Spec.Pod.Containers[0].Image = strings.Repeat("a", 5000) },
			"spec.pod.containers[0].image: 5000 characters, at most 391 allowed"},
		{"image name length",
			func(s *Service) { s.Spec.Pod.Containers[0].Image = strings.Repeat("a", MaxImageName) },
			func(s *Service) { s.Spec.Pod.Containers[0].Image = strings.Repeat("a", MaxImageName+1) + ":1" },
			"spec.pod.containers[0].image: the name (registry and repository) is 256 characters, at most 255 allowed"},
		{"containers",
			func(s *Service) { s.Spec.Pod.Containers = containers(MaxContainers) },
			func(s *Service) { s.Spec.Pod.Containers = containers(MaxContainers + 1) },
			"spec.pod.containers: 33 containers, at most 32 allowed"},
		{"init containers",
			func(s *Service) { s.Spec.Pod.InitContainers = containers(MaxContainers)[1:] },
			func(s *Service) { s.Spec.Pod.InitContainers = containers(MaxContainers + 2)[1:] },
			"spec.pod.initContainers: 33 init containers, at most 32 allowed"},
		{"container ports",
			func(s *Service) {
				for i := range MaxPorts {
					s.Spec.Pod.Containers[0].Ports = append(s.Spec.Pod.Containers[0].Ports, ContainerPort{ContainerPort: 1000 + i})
				}
			},
			func(s *Service) {
				for i := range MaxPorts + 1 {
					s.Spec.Pod.Containers[0].Ports = append(s.Spec.Pod.Containers[0].Ports, ContainerPort{ContainerPort: 1000 + i})
				}
			},
			"spec.pod.containers[0].ports: 129 ports, at most 128 allowed"},
		{"service ports",
			func(s *Service) {
				for i := range MaxPorts {
					s.Spec.Endpoint.Ports = append(s.Spec.Endpoint.Ports, ServicePort{Port: 1000 + i})
				}
			},
			func(s *Service) { s.Spec.Endpoint.Ports = make([]ServicePort, MaxPorts+1) },
			"spec.endpoint.ports: 129 ports, at most 128 allowed"},
		{"volumes",
			func(s *Service) {
				for i := range MaxVolumes {
					s.Spec.Pod.Volumes = append(s.Spec.Pod.Volumes, PodVolume{Name: fmt.Sprintf("v%d", i), Tmpfs: &TmpfsVolume{}})
				}
			},
			func(s *Service) { s.Spec.Pod.Volumes = make([]PodVolume, MaxVolumes+1) },
			"spec.pod.volumes: 65 volumes, at most 64 allowed"},
		{"mounts",
			func(s *Service) {},
			func(s *Service) { s.Spec.Pod.Containers[0].VolumeMounts = make([]VolumeMount, MaxVolumes+1) },
			"spec.pod.containers[0].volumeMounts: 65 volume mounts, at most 64 allowed"},
		{"mount path",
			func(s *Service) {
				s.Spec.Pod.Volumes = []PodVolume{{Name: "v", Tmpfs: &TmpfsVolume{}}}
				s.Spec.Pod.Containers[0].VolumeMounts = []VolumeMount{{Name: "v", Path: "/" + strings.Repeat("p", MaxPath-1)}}
			},
			func(s *Service) {
				s.Spec.Pod.Volumes = []PodVolume{{Name: "v", Tmpfs: &TmpfsVolume{}}}
				s.Spec.Pod.Containers[0].VolumeMounts = []VolumeMount{{Name: "v", Path: "/" + strings.Repeat("p", MaxPath)}}
			},
			"spec.pod.containers[0].volumeMounts[0].path: 1025 characters, at most 1024 allowed"},
		{"constraints",
			func(s *Service) {
				for range MaxPlacementTerms {
					s.Spec.Placement.Constraints = append(s.Spec.Placement.Constraints, "node.role == worker")
				}
			},
			func(s *Service) { s.Spec.Placement.Constraints = make([]string, MaxPlacementTerms+1) },
			"spec.placement.constraints: 65 constraints, at most 64 allowed"},
		{"tolerations",
			func(s *Service) {},
			func(s *Service) { s.Spec.Placement.Tolerations = make([]Toleration, 1000) },
			"spec.placement.tolerations: 1000 tolerations, at most 64 allowed"},
		{"whole object",
			func(s *Service) {
				// Just under 1 MiB across containers.
				s.Spec.Pod.Containers = containers(15)
				for i := range s.Spec.Pod.Containers {
					s.Spec.Pod.Containers[i].Command = []string{strings.Repeat("c", 65_000)}
				}
			},
			func(s *Service) {
				// Under every field's limit, over the object's: 2 MB across
				// many containers.
				s.Spec.Pod.Containers = containers(MaxContainers)
				for i := range s.Spec.Pod.Containers {
					s.Spec.Pod.Containers[i].Command = []string{strings.Repeat("c", 65_000)}
				}
			},
			"bytes encoded, at most 1048576 (1 MiB) allowed"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if err := Admit(limitService(c.good)); err != nil {
				t.Errorf("at the limit, refused: %v", err)
			}
			err := Admit(limitService(c.bad))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("past the limit: got %v, want an error containing %q", err, c.want)
			}
			if err != nil && len(err.Error()) > 20_000 {
				t.Errorf("the refusal is %d bytes long: it should name the limit, not echo the input", len(err.Error()))
			}
		})
	}
}

// Limits of the other kinds a user writes.
func TestLimitsOfOtherKinds(t *testing.T) {
	t.Parallel()
	node := func(n int) Object {
		o := &Node{Header: Header{Kind: KindNode, Metadata: Metadata{Name: "n1"}}}
		for i := range n {
			o.Spec.Taints = append(o.Spec.Taints, Taint{Key: fmt.Sprintf("k%d", i), Effect: NoSchedule})
		}
		return o
	}
	policy := func(n int) Object {
		o := &NetworkPolicy{Header: Header{Kind: KindNetworkPolicy, Metadata: Metadata{Name: "p", Namespace: "shop"}}}
		o.Spec.Ingress = make([]IngressRule, n)
		return o
	}
	binding := func(user string) Object {
		return &RoleBinding{Header: Header{Kind: KindRoleBinding, Metadata: Metadata{Name: "b", Namespace: "shop"}},
			Spec: RoleBindingSpec{User: user, Role: RoleView}}
	}
	plugin := func(n int) Object {
		o := &Volume{Header: Header{Kind: KindVolume, Metadata: Metadata{Name: "v", Namespace: "shop"}}}
		o.Spec.Driver = DriverPlugin
		o.Spec.Plugin = &PluginVolume{Name: "p", Options: manyLabels(n)}
		return o
	}
	cases := []struct {
		name      string
		good, bad Object
		want      string
	}{
		{"node taints", node(MaxPlacementTerms), node(MaxPlacementTerms + 1), "spec.taints: 65 taints, at most 64 allowed"},
		{"policy rules", policy(MaxPolicyTerms), policy(MaxPolicyTerms + 1), "spec.ingress: 65 rules, at most 64 allowed"},
		{"role binding user", binding(strings.Repeat("u", MaxUser)), binding(strings.Repeat("u", 10_000)), "spec.user: 10000 characters, at most 64 allowed"},
		{"plugin options", plugin(MaxPluginOptions), plugin(MaxPluginOptions + 1), "spec.plugin.options: 65 options, at most 64 allowed"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if err := Admit(c.good); err != nil {
				t.Errorf("at the limit, refused: %v", err)
			}
			if err := Admit(c.bad); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("past the limit: got %v, want an error containing %q", err, c.want)
			}
		})
	}
}

// The model has no annotations: a manifest giving some is refused, not
// stored unchecked.
func TestAnnotationsAreRefused(t *testing.T) {
	t.Parallel()
	errs := errorsOf(t, "apiVersion: legion/v1\nkind: Secret\nmetadata: {name: s, annotations: {a: '"+strings.Repeat("x", 300<<10)+"'}}\nspec: {text: x}\n")
	if !hasError(errs, "metadata.annotations: unknown field") {
		t.Fatalf("annotations: %q", errs)
	}
}

// admitSize counts the bytes MarshalJSON would make, HTML escapes
// included: an object of exactly MaxObjectSize passes, one byte more is
// refused with its size.
func TestAdmitSizeCountsTheEncodingExactly(t *testing.T) {
	t.Parallel()
	s := &Service{Header: Header{Kind: KindService, Metadata: Metadata{Name: "s", Namespace: DefaultNamespace}}}
	s.Spec.Pod.Containers = []Container{{Name: "c", Command: []string{""}}}
	base, err := MarshalJSON(s)
	if err != nil {
		t.Fatal(err)
	}
	escaped := (MaxObjectSize-len(base))/6 - 10 // each '<' is 6 bytes: \u003c
	for _, extra := range []int{0, 1} {
		plain := MaxObjectSize - len(base) - 6*escaped + extra
		s.Spec.Pod.Containers[0].Command[0] = strings.Repeat("<", escaped) + strings.Repeat("c", plain)
		data, err := MarshalJSON(s)
		if err != nil || len(data) != MaxObjectSize+extra {
			t.Fatalf("the test's object is %d bytes (%v), want %d", len(data), err, MaxObjectSize+extra)
		}
		var errs ErrorList
		admitSize(s, &errs)
		want := ""
		if extra > 0 {
			want = fmt.Sprintf("the object is %d bytes encoded, at most %d (1 MiB) allowed", MaxObjectSize+extra, MaxObjectSize)
		}
		if got := errs.Error(); got != want {
			t.Errorf("%d bytes: admitSize says %q, want %q", len(data), got, want)
		}
	}
}
