package legion

import "testing"

// webServiceManifest is the web service of examples/web.yaml.
const webServiceManifest = `apiVersion: legion/v1
kind: Service
metadata:
  name: web
  namespace: shop
  labels: { app: web, tier: front }
spec:
  replicas: 3
  pod:
    initContainers:
      - name: migrate
        image: registry.example/shop/web:1.4
        command: ["/app/migrate"]
        env: [{ name: DB_URL, secret: db-url }]
    containers:
      - name: web
        image: registry.example/shop/web:1.4
        ports: [{ name: http, containerPort: 8080 }]
        env:
          - { name: DB_URL, secret: db-url }
          - { name: LOG_FORMAT, value: json }
        configs: [{ name: web-config, target: /usr/local/etc/web.toml }]
        resources:
          requests: { cpu: 0.5, memory: 256Mi }
          limits: { cpu: 1, memory: 512Mi, maxproc: 256 }
        probes:
          startup: { tcp: { port: http }, period: 2s, failureThreshold: 30 }
          readiness: { http: { path: /ready, port: http }, period: 5s }
          liveness: { http: { path: /live, port: http }, failureThreshold: 3 }
        volumeMounts: [{ name: uploads, path: /var/uploads }]
      - name: log-shipper
        image: registry.example/tools/shipper:2
        resources:
          requests: { cpu: 50m, memory: 32Mi }
    volumes:
      - name: uploads
        volume: { name: uploads }
    restartPolicy: { condition: any, delay: 1s }
  placement:
    constraints: ["node.labels.disk == ssd", "node.platform.arch == amd64"]
    preferences: [{ spread: node.labels.zone }]
    tolerations: [{ key: dedicated, value: shop, effect: NoSchedule }]
  endpoint:
    mode: vip
    ports: [{ name: http, port: 80, targetPort: http, publish: ingress, publishedPort: 8080 }]
  update:
    parallelism: 1
    delay: 10s
    order: start-first
    failureAction: rollback
    maxUnavailable: 1
`

// BenchmarkAdmitWebService measures decoding and admitting the example web
// service from YAML, the work an apply does before it reaches Raft.
func BenchmarkAdmitWebService(b *testing.B) {
	data := []byte(webServiceManifest)
	b.ReportAllocs()
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		objs, err := ParseManifest("web.yaml", data)
		if err != nil || len(objs) != 1 {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "objects/s")
}

// BenchmarkAdmitDecoded measures admission alone, on an object already
// decoded (as a server re-admitting JSON does).
func BenchmarkAdmitDecoded(b *testing.B) {
	docs, err := Decode([]byte(webServiceManifest))
	if err != nil {
		b.Fatal(err)
	}
	proto := docs[0].Object
	b.ReportAllocs()
	for b.Loop() {
		o := Clone(proto)
		if err := Admit(o); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "objects/s")
}
