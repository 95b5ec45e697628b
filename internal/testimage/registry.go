package testimage

import (
	"io"
	"log"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/registry"
)

// Registry is go-containerregistry's in-process registry on a loopback
// port, speaking plain HTTP.
type Registry struct {
	srv *httptest.Server
}

// StartRegistry serves an empty registry on 127.0.0.1; Close stops it.
func StartRegistry() *Registry {
	return &Registry{srv: httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))}
}

// NewRegistry is StartRegistry for one test: it stops when the test ends.
func NewRegistry(t testing.TB) *Registry {
	r := StartRegistry()
	t.Cleanup(r.Close)
	return r
}

// Host is the registry's host:port, the first part of its references.
func (r *Registry) Host() string { return strings.TrimPrefix(r.srv.URL, "http://") }

// Ref is a reference to repo:tag in this registry.
func (r *Registry) Ref(repo, tag string) string { return r.Host() + "/" + repo + ":" + tag }

// Close stops the registry.
func (r *Registry) Close() { r.srv.Close() }
