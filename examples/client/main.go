// Command client is a small program using Legion's Go client: it applies
// a Config, reads it back, lists the Configs of its namespace and deletes
// it again. Point it at a manager with LEGION_SERVER and
// LEGION_CREDENTIALS (the admin.pem that legion init wrote).
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/client"
)

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	server := os.Getenv("LEGION_SERVER")
	if err := run(ctx, server, os.Getenv("LEGION_CREDENTIALS"), os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "example:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, server, credentials string, out io.Writer) error {
	c, err := client.New(client.Options{Server: server, CredentialsFile: credentials})
	if err != nil {
		return err
	}
	defer c.Close()

	o, err := legion.New(legion.KindConfig)
	if err != nil {
		return err
	}
	cfg := o.(*legion.Config)
	cfg.Metadata.Name = "greeting"
	cfg.Metadata.Labels = map[string]string{"example": "client"}
	cfg.Spec.Text = "hello from the Go client"

	res, err := c.ApplyOne(ctx, cfg, client.ApplyOptions{})
	if err != nil {
		return fmt.Errorf("apply: %w", err)
	}
	fmt.Fprintf(out, "config/greeting %s at version %d\n", res.Outcome, res.Object.GetMetadata().Version)

	got, err := client.GetAs[*legion.Config](ctx, c, legion.KindConfig, "", "greeting")
	if err != nil {
		return fmt.Errorf("get: %w", err)
	}
	fmt.Fprintf(out, "value: %s\n", got.Spec.Data)

	list, version, err := c.List(ctx, legion.KindConfig, client.ListOptions{Labels: map[string]string{"example": "client"}})
	if err != nil {
		return fmt.Errorf("list: %w", err)
	}
	fmt.Fprintf(out, "%d config(s) labelled example=client at version %d\n", len(list), version)

	if _, err := c.Delete(ctx, legion.KindConfig, "", "greeting", nil); err != nil {
		return fmt.Errorf("delete: %w", err)
	}
	fmt.Fprintln(out, "config/greeting deleted")
	return nil
}
