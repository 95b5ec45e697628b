package client

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/internal/testaddr"
)

// A call to an address where nothing listens fails within a few seconds,
// not after the election retry, and says where it tried and what to do.
func TestCallToNoManagerFailsFastSayingWhere(t *testing.T) {
	t.Parallel()
	addr := testaddr.Loopback(t) // nothing listens there
	c, err := New(Options{Server: addr})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	start := time.Now()
	_, err = c.Get(context.Background(), legion.KindService, "default", "web")
	took := time.Since(start)
	if err == nil || !strings.Contains(err.Error(), "no manager answers at "+addr) ||
		!strings.Contains(err.Error(), "--server") {
		t.Fatalf("call to %s with nothing there: %v", addr, err)
	}
	if took >= DefaultRetry/2 {
		t.Fatalf("the call took %s: it waited out the election retry", took)
	}
	if _, _, err := c.List(context.Background(), legion.KindService, ListOptions{}); !strings.Contains(err.Error(), "no manager answers") {
		t.Fatalf("a list: %v", err)
	}
	w, err := c.Watch(context.Background(), legion.KindService, ListOptions{}, 0)
	if err == nil {
		_, err = w.Next()
		w.Close()
	}
	if err == nil || !strings.Contains(err.Error(), "no manager answers") {
		t.Fatalf("a watch: %v", err)
	}
}
