package compose

import (
	"context"
	"fmt"
	"strings"
	"testing"
)

// stackOf writes a compose file of n services in the shape of a real
// stack: each with ports, environment, a named volume, a secret, a
// healthcheck and a deploy section.
func stackOf(n int) []byte {
	var b strings.Builder
	b.WriteString("x-deploy: &deploy\n  replicas: 2\n  resources:\n    limits: {cpus: \"0.5\", memory: 512m}\n    reservations: {cpus: \"0.1\", memory: 128m}\n  update_config: {parallelism: 1, delay: 10s, order: start-first}\n  restart_policy: {condition: on-failure, max_attempts: 3}\nservices:\n")
	for i := range n {
		fmt.Fprintf(&b, `  svc_%d:
    image: registry.example/team/svc-%d:1.%d.0
    command: ["serve", "--port", "8080"]
    environment:
      SERVICE_NAME: svc-%d
      LOG_LEVEL: ${LOG_LEVEL:-info}
      UPSTREAM: http://svc_%d:8080
    ports:
      - "%d:8080"
    expose: ["9090"]
    volumes:
      - data_%d:/var/lib/svc
      - type: tmpfs
        target: /tmp
    secrets: [shared_token]
    healthcheck:
      test: ["CMD", "/bin/health", "--port", "8080"]
      interval: 10s
    networks: [front, back]
    deploy:
      <<: *deploy
      labels: {team: core, tier: "%d"}
      placement:
        constraints: [node.labels.zone == zone-%d]
    x-legion:
      update: {maxUnavailable: 1}
`, i, i, i, i, (i+1)%n, 10000+i, i, i%3, i%4)
	}
	b.WriteString("secrets:\n  shared_token:\n    environment: TOKEN\nnetworks:\n  front: {}\n  back: {}\nvolumes:\n")
	for i := range n {
		fmt.Fprintf(&b, "  data_%d:\n    x-legion: {size: 10Gi}\n", i)
	}
	return []byte(b.String())
}

func TestStackOf50Converts(t *testing.T) {
	t.Parallel()
	res, err := Convert(context.Background(), []File{{Name: "stack.yaml", Content: stackOf(50)}}, Options{Stack: "big", Env: map[string]string{"TOKEN": "t"}})
	if err != nil {
		t.Fatal(err)
	}
	count := map[string]int{}
	for _, o := range res.Objects {
		count[string(o.GetKind())]++
	}
	want := map[string]int{"Service": 50, "Volume": 50, "Secret": 1, "NetworkPolicy": 2}
	for k, n := range want {
		if count[k] != n {
			t.Errorf("%d %s objects, want %d", count[k], k, n)
		}
	}
}

// BenchmarkConvert50 converts a 50-service stack.
func BenchmarkConvert50(b *testing.B) {
	data := stackOf(50)
	opts := Options{Stack: "big", Env: map[string]string{"TOKEN": "t"}}
	b.ReportAllocs()
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, err := Convert(context.Background(), []File{{Name: "stack.yaml", Content: data}}, opts); err != nil {
			b.Fatal(err)
		}
	}
}
