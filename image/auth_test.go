package image

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"
	"sync"

	"github.com/google/go-containerregistry/pkg/authn"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
)

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

type basicAuth struct{ user, pass string }

func (b *basicAuth) Authorization() (*authn.AuthConfig, error) {
	return &authn.AuthConfig{Username: b.user, Password: b.pass}, nil
}

// tokenServer guards repositories under /v2/private/ with a bearer-token
// challenge, answered at /token with basic credentials, as Docker's
// registry auth works.
type tokenServer struct {
	user, pass, token, realm string
	mu                       sync.Mutex
	issued                   int
}

func (s *tokenServer) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/token" {
			u, p, ok := r.BasicAuth()
			if !ok || u != s.user || p != s.pass {
				w.WriteHeader(http.StatusUnauthorized)
				return
			}
			s.mu.Lock()
			s.issued++
			s.mu.Unlock()
			json.NewEncoder(w).Encode(map[string]string{"token": s.token})
			return
		}
		if strings.HasPrefix(r.URL.Path, "/v2/private/") || r.URL.Path == "/v2/" {
			if r.Header.Get("Authorization") != "Bearer "+s.token {
				w.Header().Set("WWW-Authenticate", `Bearer realm="`+s.realm+`",service="test",scope="repository:private/app:pull"`)
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusUnauthorized)
				w.Write([]byte(`{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}`))
				return
			}
		}
		h.ServeHTTP(w, r)
	})
}

func mutateConfigFile(img v1.Image, cf *v1.ConfigFile) (v1.Image, error) {
	return mutate.ConfigFile(img, cf)
}
