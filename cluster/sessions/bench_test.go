package sessions_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/cluster/sessions/sessionstest"
	legionpb "github.com/legionbsd/legion/internal/proto"
	"github.com/legionbsd/legion/jail"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
)

// BenchmarkSavedOutput reads a finished task's 1 MiB of saved output
// through the manager: offer, the agent's Attach, and the relay.
func BenchmarkSavedOutput(b *testing.B) {
	m := sessionstest.Start(b)
	a := m.StartAgent(b, "n1")
	task := m.Put(b, "shop", "big.1", "n1", legion.TaskComplete, legion.Owner{}, "app")
	var sb strings.Builder
	for i := 0; sb.Len() < 1<<20; i++ {
		sb.WriteString(jail.FormatRecord(jail.LogRecord{Time: t0.Add(time.Duration(i) * time.Millisecond), Stream: jail.StreamStdout,
			Text: fmt.Sprintf("line %06d %s", i, strings.Repeat("x", 60))}))
	}
	a.SaveOutput(b, task, "app", sb.String())
	conn, err := grpc.NewClient(m.Addr, grpc.WithTransportCredentials(credentials.NewTLS(m.Admin.ClientConfig())))
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	c := legionpb.NewPodsClient(conn)
	b.SetBytes(int64(sb.Len()))
	b.ResetTimer()
	for range b.N {
		st, err := c.Logs(context.Background(), &legionpb.LogsRequest{Target: &legionpb.Target{Namespace: "shop", Name: "big.1"}})
		if err != nil {
			b.Fatal(err)
		}
		for {
			_, err := st.Recv()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				b.Fatal(err)
			}
		}
	}
}
