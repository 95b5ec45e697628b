package image

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
)

// Errors a registry answers that callers branch on.
var (
	// ErrDenied: the registry refused the credentials (or their absence).
	ErrDenied = errors.New("registry denied access")
	// ErrNotFound: no such repository, tag or digest.
	ErrNotFound = errors.New("image not found")
)

// Registry talks to registries with the OCI distribution API through
// go-containerregistry: bearer-token challenges answered with a login's
// basic credentials, redirects followed, and the host's proxy settings
// (HTTP_PROXY, HTTPS_PROXY, NO_PROXY) used.
type Registry struct {
	// Transport carries the requests; nil means one copy of Go's default
	// transport, made at first use and kept, so connections are reused;
	// it reads the proxy from the environment, and waits at most
	// ResponseTimeout for each answer's headers.
	Transport http.RoundTripper
	// ResponseTimeout is how long the default transport waits for a
	// registry to start answering a request (zero: DefaultResponseTimeout).
	ResponseTimeout time.Duration

	once sync.Once
	def  http.RoundTripper
}

func (r *Registry) transport() http.RoundTripper {
	if r.Transport != nil {
		return r.Transport
	}
	r.once.Do(func() {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.Proxy = http.ProxyFromEnvironment
		t.ResponseHeaderTimeout = r.ResponseTimeout
		if t.ResponseHeaderTimeout == 0 {
			t.ResponseHeaderTimeout = DefaultResponseTimeout
		}
		r.def = t
	})
	return r.def
}

// DefaultResponseTimeout bounds the wait for a registry to start
// answering: Go's default transport waits for ever, and a registry that
// takes the connection and never answers would keep a pull "pulling" for
// good. A layer's body, once it flows, takes as long as it takes.
const DefaultResponseTimeout = 30 * time.Second

// CloseIdle closes the idle connections of the default transport.
func (r *Registry) CloseIdle() {
	if t, ok := r.transport().(interface{ CloseIdleConnections() }); ok {
		t.CloseIdleConnections()
	}
}

// Options are the remote options for a call: the context, the transport
// and the login (anonymous when nil). Package cosign uses them too.
func (r *Registry) Options(ctx context.Context, login *Login) []remote.Option {
	auth := authn.Anonymous
	if login != nil {
		auth = login.authenticator()
	}
	return []remote.Option{remote.WithContext(ctx), remote.WithTransport(r.transport()), remote.WithAuth(auth)}
}

// Resolve returns the digest a reference names: the index's for an image
// of several platforms, never a config's. A reference by digest is
// answered without asking. The leader pins tags with it.
func (r *Registry) Resolve(ctx context.Context, ref Reference, login *Login) (string, error) {
	if d := ref.Digest(); d != "" {
		return d, nil
	}
	if ref.Local() {
		return "", fmt.Errorf("resolve %s: localhost images are in no registry", ref)
	}
	opts := r.Options(ctx, login)
	desc, err := remote.Head(ref.Name(), opts...)
	if err != nil {
		// Some registries answer HEAD without a digest or not at all;
		// a GET of the manifest tells it too.
		var gerr error
		var d *remote.Descriptor
		d, gerr = remote.Get(ref.Name(), opts...)
		if gerr != nil {
			return "", fmt.Errorf("resolve %s: %w", ref, classifyRemote(gerr))
		}
		return d.Digest.String(), nil
	}
	return desc.Digest.String(), nil
}

// fetchDescriptor gets the manifest a reference names. go-containerregistry
// checks a manifest asked for by digest against that digest.
func (r *Registry) fetchDescriptor(ctx context.Context, ref Reference, login *Login) (*remote.Descriptor, error) {
	d, err := remote.Get(ref.Name(), r.Options(ctx, login)...)
	if err != nil {
		return nil, fmt.Errorf("fetch manifest of %s: %w", ref, classifyRemote(err))
	}
	return d, nil
}

// selectImage picks the image to run from what a reference names:
// the platform's entry of an index, or the image itself when its config's
// platform is one the rule accepts.
func selectImage(ref Reference, desc *remote.Descriptor, rule PlatformRule) (v1.Image, Platform, error) {
	if desc.MediaType.IsIndex() {
		idx, err := desc.ImageIndex()
		if err != nil {
			return nil, Platform{}, fmt.Errorf("image %s: read index: %w", ref, err)
		}
		im, err := idx.IndexManifest()
		if err != nil {
			return nil, Platform{}, fmt.Errorf("image %s: read index: %w", ref, classifyRemote(err))
		}
		d, p, err := rule.Pick(ref.String(), im)
		if err != nil {
			return nil, Platform{}, err
		}
		img, err := idx.Image(d.Digest)
		if err != nil {
			return nil, Platform{}, fmt.Errorf("image %s: manifest %s for %s: %w", ref, d.Digest, p, classifyRemote(err))
		}
		return img, p, nil
	}
	img, err := desc.Image()
	if err != nil {
		return nil, Platform{}, fmt.Errorf("image %s: %w", ref, classifyRemote(err))
	}
	return img, Platform{}, nil
}

// classifyRemote marks the registry answers callers branch on.
func classifyRemote(err error) error {
	var te *transport.Error
	if errors.As(err, &te) {
		switch te.StatusCode {
		case http.StatusUnauthorized, http.StatusForbidden:
			return errors.Join(ErrDenied, err)
		case http.StatusNotFound:
			return errors.Join(ErrNotFound, err)
		}
		for _, d := range te.Errors {
			switch d.Code {
			case transport.UnauthorizedErrorCode, transport.DeniedErrorCode:
				return errors.Join(ErrDenied, err)
			case transport.ManifestUnknownErrorCode, transport.NameUnknownErrorCode, transport.BlobUnknownErrorCode:
				return errors.Join(ErrNotFound, err)
			}
		}
	}
	return err
}
