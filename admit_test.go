package legion

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// admitOne parses and admits a single-object manifest.
func admitOne(t *testing.T, manifest string) Object {
	t.Helper()
	objs, err := ParseManifest("t.yaml", []byte(manifest))
	if err != nil {
		t.Fatalf("admission refused:\n%v\nmanifest:\n%s", err, manifest)
	}
	if len(objs) != 1 {
		t.Fatalf("got %d objects, want 1", len(objs))
	}
	return objs[0]
}

func specJSON(t *testing.T, o Object) string {
	t.Helper()
	data, err := json.Marshal(o.SpecPtr())
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func compactJSON(t *testing.T, s string) string {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("bad expected JSON %s: %v", s, err)
	}
	out, _ := json.Marshal(v)
	return string(out)
}

func sameJSON(t *testing.T, got, want string) {
	t.Helper()
	if d := cmp.Diff(compactJSON(t, want), compactJSON(t, got)); d != "" {
		t.Errorf("spec differs (-want +got):\n%s", d)
	}
}

const containerDefaults = `"pullPolicy":"if-not-present","resources":{"requests":{"cpu":"0","memory":"0"},"limits":{"cpu":"0","memory":"0","maxproc":0,"openfiles":0}},"probes":{},"security":{"securelevel":2,"enforceStatfs":2},"stopGracePeriod":"10s"`

func TestDefaultsOfEveryKind(t *testing.T) {
	t.Parallel()
	cases := []struct {
		kind, meta, spec, want string
	}{
		{"Service", "{name: web}", "{pod: {containers: [{name: web, image: nginx}]}}",
			`{"mode":"replicated","replicas":1,"pod":{"containers":[{"name":"web","image":"nginx",` + containerDefaults + `}],"restartPolicy":{"condition":"any","maxAttempts":0,"delay":"1s"}},"placement":{},"endpoint":{"mode":"vip"},"update":{"parallelism":1,"delay":"0s","order":"stop-first","failureAction":"pause","monitor":"5s"}}`},
		{"Service", "{name: agent}", "{mode: global, pod: {containers: [{name: a, image: x}]}}",
			`{"mode":"global","pod":{"containers":[{"name":"a","image":"x",` + containerDefaults + `}],"restartPolicy":{"condition":"any","maxAttempts":0,"delay":"1s"}},"placement":{},"endpoint":{"mode":"vip"},"update":{"parallelism":1,"delay":"0s","order":"stop-first","failureAction":"pause","monitor":"5s"}}`},
		{"Job", "{name: j}", "{pod: {containers: [{name: a, image: x}]}}",
			`{"mode":"replicated","completions":1,"parallelism":1,"backoffLimit":6,"pod":{"containers":[{"name":"a","image":"x",` + containerDefaults + `}],"restartPolicy":{"condition":"none","maxAttempts":0,"delay":"1s"}},"placement":{}}`},
		{"CronJob", "{name: c}", "{schedule: '*/5 *  * * *', job: {pod: {containers: [{name: a, image: x}]}}}",
			`{"schedule":"*/5 * * * *","suspend":false,"concurrencyPolicy":"allow","successfulJobsHistoryLimit":3,"failedJobsHistoryLimit":1,"job":{"mode":"replicated","completions":1,"parallelism":1,"backoffLimit":6,"pod":{"containers":[{"name":"a","image":"x",` + containerDefaults + `}],"restartPolicy":{"condition":"none","maxAttempts":0,"delay":"1s"}},"placement":{}}}`},
		// Kubernetes' named schedules are stored as their five fields.
		{"CronJob", "{name: c}", "{schedule: '@Daily', job: {pod: {containers: [{name: a, image: x}]}}}",
			`{"schedule":"0 0 * * *","suspend":false,"concurrencyPolicy":"allow","successfulJobsHistoryLimit":3,"failedJobsHistoryLimit":1,"job":{"mode":"replicated","completions":1,"parallelism":1,"backoffLimit":6,"pod":{"containers":[{"name":"a","image":"x",` + containerDefaults + `}],"restartPolicy":{"condition":"none","maxAttempts":0,"delay":"1s"}},"placement":{}}}`},
		{"Secret", "{name: s}", "{text: hello}", `{"data":"aGVsbG8="}`},
		{"Config", "{name: c}", "{data: aGVsbG8=}", `{"data":"aGVsbG8="}`},
		{"Volume", "{name: v}", "{}", `{"driver":"zfs"}`},
		{"Volume", "{name: v}", "{driver: nfs, nfs: {server: nas, path: /export}}", `{"driver":"nfs","nfs":{"server":"nas","path":"/export"}}`},
		{"Namespace", "{name: shop}", "{}", `{"isolation":"namespace","security":{}}`},
		{"Node", "{name: n1}", "{}", `{"role":"worker","availability":"active"}`},
		{"NetworkPolicy", "{name: p}", "{ingress: [{ports: [{port: 80}]}]}", `{"ingress":[{"ports":[{"protocol":"tcp","port":80}]}]}`},
		{"Route", "{name: r}", "{host: A.Example.org., service: web}", `{"host":"a.example.org","path":"/","service":"web"}`},
		{"Route", "{name: r}", "{host: a.example.org, path: /shop/, service: web, tls: {secret: s, acme: {email: a@b.c}}}",
			`{"host":"a.example.org","path":"/shop","service":"web","tls":{"secret":"s","acme":{"email":"a@b.c","directory":"` + LetsEncryptDirectory + `"}}}`},
		{"Route", "{name: r}", "{host: a.b, service: web, trustedProxies: [10.1.2.3/8, 192.0.2.7], tls: {secret: s, redirect: true}}",
			`{"host":"a.b","path":"/","service":"web","tls":{"secret":"s","redirect":true},"trustedProxies":["10.0.0.0/8","192.0.2.7/32"]}`},
		{"RoleBinding", "{name: rb}", "{user: alice, role: view}", `{"user":"alice","role":"view"}`},
		{"ImagePolicy", "{name: ip}", "{repositories: [docker.io/library/*], keys: [" + jsonKey + "]}",
			`{"repositories":["docker.io/library/*"],"keys":[` + jsonKey + `],"mode":"enforce"}`},
	}
	for _, c := range cases {
		t.Run(c.kind+" "+c.meta, func(t *testing.T) {
			o := admitOne(t, fmt.Sprintf("apiVersion: legion/v1\nkind: %s\nmetadata: %s\nspec: %s\n", c.kind, c.meta, c.spec))
			sameJSON(t, specJSON(t, o), c.want)
			if o.GetKind().Namespaced() && o.GetMetadata().Namespace != DefaultNamespace {
				t.Errorf("namespace %q, want %q", o.GetMetadata().Namespace, DefaultNamespace)
			}
		})
	}
}

const testKeyPEM = "-----BEGIN PUBLIC KEY-----\nMFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEwqfFOtYko5dQZduEKMoLVaCPgTHq\n2gVJZFUIZkq3gMY6+PWUkD3QJZ+9I7buAwr/f/zz8sud/mErxwpMS+cDFw==\n-----END PUBLIC KEY-----\n"

var jsonKey = func() string { b, _ := json.Marshal(testKeyPEM); return string(b) }()

func TestDefaultsServerFieldsAndStatusAreDropped(t *testing.T) {
	t.Parallel()
	o := admitOne(t, `apiVersion: legion/v1
kind: Service
metadata: {name: web, uid: abc, version: 9, generation: 3}
spec: {pod: {containers: [{name: a, image: x}]}}
status: {ready: 3, message: hi}
`)
	s := o.(*Service)
	if s.Metadata.UID != "" || s.Metadata.Version != 0 || s.Metadata.Generation != 0 {
		t.Errorf("server-set metadata kept: %+v", s.Metadata)
	}
	if s.Status.Ready != 0 || s.Status.Message != "" {
		t.Errorf("status kept: %+v", s.Status)
	}
}

func TestTwoManifestsMeaningTheSameStoreTheSameBytes(t *testing.T) {
	t.Parallel()
	a := `apiVersion: legion/v1
kind: Service
metadata: {name: web, namespace: default}
spec:
  replicas: 1
  pod:
    containers:
      - name: web
        image: nginx
        resources:
          requests: {cpu: 0.5, memory: 1073741824}
          limits: {cpu: 1000m}
        probes:
          liveness: {tcp: {port: 80}, period: 90s}
    restartPolicy: {condition: any, delay: 1s}
  placement: {constraints: ["node.labels.disk==ssd"]}
  update: {delay: 60s, monitor: 5s}
`
	b := `{"apiVersion":"legion/v1","kind":"Service","metadata":{"name":"web"},"spec":{"pod":{"containers":[{"name":"web","image":"nginx",
 "resources":{"requests":{"cpu":"500m","memory":"1Gi"},"limits":{"cpu":1}},
 "probes":{"liveness":{"tcp":{"port":"80"},"period":"1m30s","timeout":"1s","failureThreshold":3}}}]},
 "placement":{"constraints":["node.labels.disk ==   ssd"]},"update":{"delay":"1m","parallelism":1}}}`
	oa, ob := admitOne(t, a), admitOne(t, b)
	ja, _ := MarshalJSON(oa)
	jb, _ := MarshalJSON(ob)
	if string(ja) != string(jb) {
		t.Fatalf("the same service stored differently:\n%s\n%s", ja, jb)
	}
	for _, want := range []string{`"cpu":"500m"`, `"memory":"1Gi"`, `"period":"1m30s"`, `"delay":"1m"`, `"node.labels.disk == ssd"`, `"port":80`} {
		if !strings.Contains(string(ja), want) {
			t.Errorf("canonical form %s missing from %s", want, ja)
		}
	}
}
