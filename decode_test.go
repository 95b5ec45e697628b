package legion

import (
	"errors"
	"strings"
	"testing"
)

// errorsOf parses a manifest and returns every message, one per line, as
// ObjectError renders them without the source and document prefix.
func errorsOf(t *testing.T, manifest string) []string {
	t.Helper()
	_, err := ParseManifest("test.yaml", []byte(manifest))
	if err == nil {
		return nil
	}
	var out []string
	for _, line := range strings.Split(err.Error(), "\n") {
		if _, rest, ok := strings.Cut(line, "): "); ok {
			line = rest
		} else if _, rest, ok := strings.Cut(line, ": document "); ok {
			if _, r2, ok := strings.Cut(rest, ": "); ok {
				line = r2
			}
		}
		out = append(out, line)
	}
	return out
}

func hasError(list []string, want string) bool {
	for _, l := range list {
		if strings.Contains(l, want) {
			return true
		}
	}
	return false
}

const minimalService = `apiVersion: legion/v1
kind: Service
metadata: { name: web }
spec:
  pod:
    containers:
      - name: web
        image: nginx
`

func TestDecodeStrictErrorsNameTheFullPath(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, manifest, want string
	}{
		{"unknown field deep in a list", strings.Replace(minimalService, "image: nginx", "imagee: nginx", 1),
			"spec.pod.containers[0].imagee: unknown field"},
		{"missing required field", strings.Replace(minimalService, "image: nginx", "command: [x]", 1),
			"spec.pod.containers[0].image: missing"},
		{"unknown top-level field", minimalService + "extra: 1\n", "extra: unknown field"},
		{"a spec field at the top", "apiVersion: legion/v1\nkind: Secret\nmetadata: {name: s}\ndata: {v: eA==}\n",
			"data: unknown field: a Secret's data goes under spec (spec.data)"},
		{"wrong type", strings.Replace(minimalService, "pod:", "replicas: three\n  pod:", 1),
			`spec.replicas: expected a whole number, got "three"`},
		{"list where an object belongs", strings.Replace(minimalService, "pod:", "update: [1]\n  pod:", 1),
			"spec.update: expected an object, got a list"},
		{"duplicate key", strings.Replace(minimalService, "image: nginx", "image: nginx\n        image: nginx", 1),
			"spec.pod.containers[0].image: given twice"},
		{"bad quantity", strings.Replace(minimalService, "image: nginx", "image: nginx\n        resources: {requests: {cpu: lots}}", 1),
			`spec.pod.containers[0].resources.requests.cpu: invalid CPU quantity "lots"`},
		{"bad duration", strings.Replace(minimalService, "pod:", "update: {delay: 10}\n  pod:", 1),
			`spec.update.delay: invalid duration "10"`},
		{"unknown kind", strings.Replace(minimalService, "kind: Service", "kind: Deployment", 1), `kind: unknown kind "Deployment"`},
		{"missing kind", strings.Replace(minimalService, "kind: Service\n", "", 1), "kind: missing"},
		{"wrong apiVersion", strings.Replace(minimalService, "legion/v1", "v1", 1), `apiVersion: expected legion/v1, got "v1"`},
		{"missing metadata", strings.Replace(minimalService, "metadata: { name: web }\n", "", 1), "metadata: missing"},
		{"status on a kind without one", "apiVersion: legion/v1\nkind: Secret\nmetadata: {name: s}\nspec: {text: x}\nstatus: {}\n", "status: unknown field: Secret has no status"},
		{"not an object", "- a\n- b\n", "expected an object"},
		{"bad boolean", strings.Replace(minimalService, "image: nginx", "image: nginx\n        volumeMounts: [{name: a, path: /a, readOnly: yes}]", 1),
			`spec.pod.containers[0].volumeMounts[0].readOnly: expected true or false, got "yes"`},
		{"bad base64", "apiVersion: legion/v1\nkind: Secret\nmetadata: {name: s}\nspec: {data: '%%%'}\n", "spec.data: expected base64 text"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			errs := errorsOf(t, c.manifest)
			if !hasError(errs, c.want) {
				t.Fatalf("want an error containing %q, got %q", c.want, errs)
			}
		})
	}
	if errs := errorsOf(t, minimalService); errs != nil {
		t.Fatalf("the minimal service must pass, got %q", errs)
	}
}

func TestDecodeMultiDocumentJSONAndMergeKeys(t *testing.T) {
	t.Parallel()
	manifest := `
x-common: &common
  image: nginx
  pullPolicy: always
---
` + minimalService + `---
{"apiVersion": "legion/v1", "kind": "Secret", "metadata": {"name": "s"}, "spec": {"text": "hi"}}
---
apiVersion: legion/v1
kind: Service
metadata: { name: merged }
spec:
  pod:
    containers:
      - <<: *common
        name: web
        pullPolicy: never
`
	// The first document is not an object of the model: it is refused,
	// and the others still decode.
	objs, err := ParseManifest("m.yaml", []byte(manifest))
	if err == nil || !strings.Contains(err.Error(), "document 1") {
		t.Fatalf("want the anchor-only document refused as document 1, got %v", err)
	}
	if len(objs) != 3 {
		t.Fatalf("got %d objects, want 3", len(objs))
	}
	sec := objs[1].(*Secret)
	if string(sec.Spec.Data) != "hi" || sec.Spec.Text != "" {
		t.Fatalf("JSON secret: %+v", sec.Spec)
	}
	c := objs[2].(*Service).Spec.Pod.Containers[0]
	if c.Image != "nginx" || c.PullPolicy != PullNever {
		t.Fatalf("merge keys: image %q pullPolicy %q, want nginx and the explicit never", c.Image, c.PullPolicy)
	}
	var oe *ObjectError
	if !errors.As(err, &oe) || oe.Index != 1 {
		t.Fatalf("want an ObjectError for document 1, got %T %v", err, err)
	}
}

func TestDecodeSyntaxErrorAndEmptyDocuments(t *testing.T) {
	t.Parallel()
	objs, err := ParseManifest("e.yaml", []byte("---\n---\n"+minimalService+"---\n"))
	if err != nil || len(objs) != 1 {
		t.Fatalf("empty documents must be skipped: %d objects, %v", len(objs), err)
	}
	_, err = ParseManifest("bad.yaml", []byte("kind: [unclosed\n"))
	if err == nil || !strings.Contains(err.Error(), "bad.yaml") {
		t.Fatalf("want a syntax error naming the file, got %v", err)
	}
}

func TestDecodeAliasBombIsBounded(t *testing.T) {
	t.Parallel()
	// A small document whose aliases expand to millions of values: 1100
	// containers, each the same alias holding 1000 environment variables.
	var b strings.Builder
	b.WriteString("x-anchors:\n  v: &v {name: A, value: b}\n  c: &c {name: x, image: y, env: [")
	b.WriteString(aliases("*v", 1000))
	b.WriteString("]}\napiVersion: legion/v1\nkind: Service\nmetadata: {name: web}\nspec:\n  pod:\n    containers: [")
	b.WriteString(aliases("*c", 1100))
	b.WriteString("]\n")
	if b.Len() > 20000 {
		t.Fatalf("the test document is %d bytes, meant to be small", b.Len())
	}
	errs := errorsOf(t, b.String())
	if !hasError(errs, "document too large") {
		t.Fatalf("want the expansion refused, got %d errors: %.300q", len(errs), errs)
	}
	if len(errs) > maxErrors+1 {
		t.Fatalf("got %d errors, want them capped at %d", len(errs), maxErrors)
	}
}

func TestDecodeSelfMergeIsRefused(t *testing.T) {
	t.Parallel()
	errs := errorsOf(t, "apiVersion: legion/v1\nkind: Secret\nmetadata: &m {name: s, <<: *m}\nspec: {text: x}\n")
	if !hasError(errs, "merge key (<<) includes the mapping it is in") {
		t.Fatalf("got %q", errs)
	}
}

// ParseManifestIn puts objects that name no namespace in the one asked
// for, refuses those that name another, and leaves cluster-scoped kinds
// alone.
func TestParseManifestIn(t *testing.T) {
	const manifest = `apiVersion: legion/v1
kind: Config
metadata: {name: plain}
spec: {text: x}
---
apiVersion: legion/v1
kind: Config
metadata: {name: same, namespace: dev}
spec: {text: x}
---
apiVersion: legion/v1
kind: Namespace
metadata: {name: dev}
`
	objs, err := ParseManifestIn("m.yaml", []byte(manifest), "dev")
	if err != nil || len(objs) != 3 {
		t.Fatalf("ParseManifestIn: %d objects, %v", len(objs), err)
	}
	for i, want := range []string{"dev", "dev", ""} {
		if got := objs[i].GetMetadata().Namespace; got != want {
			t.Errorf("object %d: namespace %q, want %q", i, got, want)
		}
	}
	other := strings.Replace(manifest, "namespace: dev", "namespace: shop", 1)
	objs, err = ParseManifestIn("m.yaml", []byte(other), "dev")
	if len(objs) != 2 || err == nil || !strings.Contains(err.Error(), `(Config shop/same): metadata.namespace: "shop", while the objects are asked for in namespace "dev"`) {
		t.Errorf("an object of another namespace: %d objects, %v", len(objs), err)
	}
	if objs, err := ParseManifestIn("m.yaml", []byte(other), ""); err != nil || objs[0].GetMetadata().Namespace != DefaultNamespace {
		t.Errorf("without a namespace asked for: %v", err)
	}
}

// A Kubernetes manifest's kind is refused saying which of Legion's stands
// for it.
func TestDecodeKubernetesKindSaysLegions(t *testing.T) {
	for kind, says := range map[string]string{
		"Deployment": "; a Deployment is a Service here (kind: Service)",
		"ConfigMap":  "; a ConfigMap is a Config here (kind: Config)",
		"Pod":        "; a pod is a task's, which Legion makes from a Service or Job",
	} {
		errs := errorsOf(t, "apiVersion: apps/v1\nkind: "+kind+"\nmetadata: {name: web}\n")
		if len(errs) == 0 || !strings.HasPrefix(errs[0], `kind: unknown kind "`+kind+`"`) || !strings.HasSuffix(errs[0], says) {
			t.Errorf("a Kubernetes %s: %q, want it to end %q", kind, errs, says)
		}
	}
	if errs := errorsOf(t, "apiVersion: legion/v1\nkind: Servce\nmetadata: {name: web}\n"); len(errs) == 0 || strings.Contains(errs[0], ";") {
		t.Errorf("a misspelt kind: %q, want no Kubernetes hint", errs)
	}
}

// A manifest written for Kubernetes is refused naming, for each field of
// its kinds Legion does not have, where the same thing is said here.
func TestKubernetesFieldsNamed(t *testing.T) {
	t.Parallel()
	_, err := ParseManifest("k8s.yaml", []byte(`apiVersion: apps/v1
kind: Service
metadata: {name: web}
spec:
  selector: {matchLabels: {app: web}}
  strategy: {type: RollingUpdate}
  template:
    spec:
      containers: [{name: web, image: nginx:1.25}]
`))
	for _, want := range []string{
		`apiVersion: expected legion/v1, got "apps/v1": Legion's objects are its own, not Kubernetes'`,
		"spec.selector: unknown field: a Service's or Job's tasks are its own, so it has no selector",
		"spec.strategy: unknown field: a Service's rolling update is spec.update here",
		"spec.template: unknown field: Kubernetes' spec.template.spec is spec.pod here",
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("a Deployment's fields in a Service: %v, want it to say %q", err, want)
		}
	}
	_, err = ParseManifest("cj.yaml", []byte("apiVersion: legion/v1\nkind: CronJob\nmetadata: {name: c}\nspec: {schedule: '0 3 * * *', jobTemplate: {}}\n"))
	if err == nil || !strings.Contains(err.Error(), "spec.jobTemplate: unknown field: Kubernetes' spec.jobTemplate.spec is spec.job here") {
		t.Errorf("a CronJob's jobTemplate: %v", err)
	}
	// A container's Kubernetes fields, in a CronJob's init container.
	_, err = ParseManifest("cj.yaml", []byte(`apiVersion: legion/v1
kind: CronJob
metadata: {name: c}
spec:
  schedule: "0 3 * * *"
  job:
    pod:
      initContainers:
        - name: i
          image: x:1
          imagePullPolicy: Always
          livenessProbe: {}
          volumeMounts: [{name: v, mountPath: /v}]
          env: [{name: A, valueFrom: {secretKeyRef: {name: s, key: k}}}]
`))
	for _, want := range []string{
		"spec.job.pod.initContainers[0].imagePullPolicy: unknown field: it is pullPolicy here",
		"spec.job.pod.initContainers[0].livenessProbe: unknown field: a container's probes are probes.liveness",
		"spec.job.pod.initContainers[0].volumeMounts[0].mountPath: unknown field: a mount's path is path here",
		"spec.job.pod.initContainers[0].env[0].valueFrom: unknown field: a variable's value from a Secret or Config is env[].secret",
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("a container's Kubernetes fields: %v, want it to say %q", err, want)
		}
	}
}

// kubectl's List (as kubectl get -o yaml writes a listing) is read as its
// items, each named by its place in it; one budget of values holds for
// the whole document, so aliases of items cannot multiply past it.
func TestDecodeKubectlList(t *testing.T) {
	t.Parallel()
	objs, err := ParseManifest("list.yaml", []byte(`apiVersion: v1
kind: List
items:
  - {apiVersion: legion/v1, kind: Config, metadata: {name: a}, spec: {text: x}}
  - {apiVersion: legion/v1, kind: Config, metadata: {name: b}, spec: {text: y}}
---
apiVersion: legion/v1
kind: Config
metadata: {name: c}
spec: {text: z}
`))
	if err != nil || len(objs) != 3 || objs[0].GetMetadata().Name != "a" || objs[1].GetMetadata().Name != "b" || objs[2].GetMetadata().Name != "c" {
		t.Fatalf("a List and a document: %v, %v", objs, err)
	}
	_, err = ParseManifest("list.yaml", []byte("kind: List\nitems:\n  - {apiVersion: legion/v1, kind: Config, metadata: {name: a}, spec: {text: x}}\n  - {apiVersion: legion/v1, kind: Config, metadata: {name: b}, spec: {txt: y}}\n"))
	if err == nil || !strings.Contains(err.Error(), "list.yaml: document 1, item 2 (Config default/b): spec.txt: unknown field") {
		t.Errorf("a List's bad item: %v", err)
	}
	if _, err := ParseManifest("list.yaml", []byte("kind: List\nitems: {a: b}\n")); err == nil || !strings.Contains(err.Error(), "items: a List's items: expected a list of objects") {
		t.Errorf("a List without a list of items: %v", err)
	}
	// A bare list, as legion get -o json prints a listing.
	objs, err = ParseManifest("list.json", []byte(`[{"apiVersion": "legion/v1", "kind": "Config", "metadata": {"name": "a"}, "spec": {"text": "x"}},
 {"apiVersion": "legion/v1", "kind": "Config", "metadata": {"name": "b"}, "spec": {"text": "y"}}]`))
	if err != nil || len(objs) != 2 || objs[1].GetMetadata().Name != "b" {
		t.Errorf("a JSON list of objects: %v, %v", objs, err)
	}
	if _, err := ParseManifest("list.json", []byte(`[1]`)); err == nil || !strings.Contains(err.Error(), "document 1, item 1: expected an object") {
		t.Errorf("a list of a number: %v", err)
	}
	// 400 items, each an alias of a Service of 1,000 variables: 400,000
	// values from a small document.
	var b strings.Builder
	b.WriteString("x-anchors:\n  v: &v {name: A, value: b}\n  s: &s {apiVersion: legion/v1, kind: Service, metadata: {name: web}, spec: {pod: {containers: [{name: x, image: y, env: [")
	b.WriteString(aliases("*v", 1000))
	b.WriteString("]}]}}}\nkind: List\nitems: [")
	b.WriteString(aliases("*s", 400))
	b.WriteString("]\n")
	if _, err := ParseManifest("bomb.yaml", []byte(b.String())); err == nil || !strings.Contains(err.Error(), "document too large") || strings.Contains(err.Error(), "item 400 ") {
		t.Errorf("a List whose items' aliases expand past the budget: %.300v, want it refused, the items after it not read", err)
	}
}

// aliases is n references to one YAML anchor, comma-separated, as a flow
// list's items.
func aliases(alias string, n int) string {
	return strings.TrimSuffix(strings.Repeat(alias+",", n), ",")
}
