package image

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
)

// Login is one account at a registry, as a Docker config holds it.
type Login struct {
	Username      string
	Password      string
	IdentityToken string // an OAuth refresh token (docker login with a token)
	RegistryToken string // a bearer token used as is
}

func (l Login) authenticator() authn.Authenticator {
	return authn.FromConfig(authn.AuthConfig{
		Username:      l.Username,
		Password:      l.Password,
		IdentityToken: l.IdentityToken,
		RegistryToken: l.RegistryToken,
	})
}

// Logins are the accounts of one Docker config, by registry host.
type Logins map[string]Login

// dockerConfig is the part of ~/.docker/config.json (or a
// kubernetes.io/dockerconfigjson Secret) that Legion reads. Credential
// helpers are not supported: the spec rules them out.
type dockerConfig struct {
	Auths map[string]struct {
		Auth          string `json:"auth"`
		Username      string `json:"username"`
		Password      string `json:"password"`
		IdentityToken string `json:"identitytoken"`
		RegistryToken string `json:"registrytoken"`
	} `json:"auths"`
}

// ParseDockerConfig reads the auths of a Docker config: each entry either
// `auth` (base64 of user:password) or `username` and `password`.
func ParseDockerConfig(b []byte) (Logins, error) {
	var c dockerConfig
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("docker config: %w", err)
	}
	if c.Auths == nil {
		return nil, fmt.Errorf("docker config: no auths")
	}
	out := Logins{}
	keys := make([]string, 0, len(c.Auths))
	for k := range c.Auths {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		a := c.Auths[k]
		l := Login{Username: a.Username, Password: a.Password, IdentityToken: a.IdentityToken, RegistryToken: a.RegistryToken}
		if a.Auth != "" {
			raw, err := base64.StdEncoding.DecodeString(a.Auth)
			if err != nil {
				return nil, fmt.Errorf("docker config: auths[%q].auth: not base64: %w", k, err)
			}
			user, pass, ok := strings.Cut(string(raw), ":")
			if !ok || user == "" {
				return nil, fmt.Errorf("docker config: auths[%q].auth: want base64 of user:password", k)
			}
			l.Username, l.Password = user, pass
		}
		if l.Username == "" && l.IdentityToken == "" && l.RegistryToken == "" {
			return nil, fmt.Errorf("docker config: auths[%q]: want auth, or username and password", k)
		}
		out[RegistryHost(k)] = l
	}
	return out, nil
}

// RegistryHost normalises a Docker config key (https://index.docker.io/v1/,
// ghcr.io, http://127.0.0.1:5000) to a registry host as references name it
// (docker.io for Docker Hub).
func RegistryHost(key string) string {
	h := strings.ToLower(key)
	if i := strings.Index(h, "://"); i >= 0 {
		h = h[i+3:]
	}
	h, _, _ = strings.Cut(h, "/")
	switch h {
	case "index.docker.io", "registry-1.docker.io", "docker.io", "registry.hub.docker.com":
		return "docker.io"
	}
	return h
}

// For returns the login for a registry host (as Reference.Registry gives it).
func (l Logins) For(registry string) (Login, bool) {
	x, ok := l[RegistryHost(registry)]
	return x, ok
}

// LoginFor picks the login for a reference's registry from a pod's pull
// secrets, in order; nil (anonymous) when none names it.
func LoginFor(ref string, secrets ...Logins) (*Login, error) {
	r, err := ParseReference(ref)
	if err != nil {
		return nil, err
	}
	for _, s := range secrets {
		if l, ok := s.For(r.Registry()); ok {
			return &l, nil
		}
	}
	return nil, nil
}
