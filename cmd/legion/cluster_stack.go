package main

import (
	"context"
	"io"
	"time"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/client"
)

// clusterStackClient adapts the Go client to what the stack commands
// need (stackClient); connectStackClient makes one.
type clusterStackClient struct{ c *client.Client }

var _ stackClient = clusterStackClient{}

func (s clusterStackClient) Apply(ctx context.Context, objs []legion.Object) ([]string, error) {
	rs, err := s.c.Apply(ctx, objs, client.ApplyOptions{Brief: true})
	if err != nil {
		return nil, err
	}
	outcomes := make([]string, len(rs))
	for i, r := range rs {
		outcomes[i] = r.Outcome
	}
	return outcomes, nil
}

func (s clusterStackClient) List(ctx context.Context, kind legion.Kind, namespace string, selector map[string]string) ([]legion.Object, error) {
	objs, _, err := s.c.List(ctx, kind, client.ListOptions{Namespace: namespace, AllNamespaces: namespace == "", Labels: selector})
	return objs, err
}

func (s clusterStackClient) Delete(ctx context.Context, kind legion.Kind, namespace, name string) error {
	_, err := s.c.Delete(ctx, kind, namespace, name, nil)
	return err
}

func (s clusterStackClient) FollowRollout(ctx context.Context, out io.Writer, namespace, name string, timeout time.Duration) error {
	return followRollout(ctx, s.c, out, namespace, name, timeout, false)
}

func (s clusterStackClient) FollowJob(ctx context.Context, out io.Writer, namespace, name string, timeout time.Duration) error {
	return followJob(ctx, s.c, out, namespace, name, timeout)
}
