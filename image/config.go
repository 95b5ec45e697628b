package image

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
)

// Config is an image configuration (OCI image-spec config). Keys are read
// without regard to case, as FreeBSD's own images write `cmd`; keys it
// does not name are kept, so a config read and written again loses nothing.
type Config struct {
	Architecture string          `json:"architecture,omitempty"`
	OS           string          `json:"os,omitempty"`
	Variant      string          `json:"variant,omitempty"`
	Config       ContainerConfig `json:"config"`
	RootFS       RootFS          `json:"rootfs"`

	extra map[string]json.RawMessage
}

// ContainerConfig is what a container of the image runs by default.
type ContainerConfig struct {
	User         string              `json:"User,omitempty"`
	Env          []string            `json:"Env,omitempty"`
	Entrypoint   []string            `json:"Entrypoint,omitempty"`
	Cmd          []string            `json:"Cmd,omitempty"`
	WorkingDir   string              `json:"WorkingDir,omitempty"`
	Labels       map[string]string   `json:"Labels,omitempty"`
	ExposedPorts map[string]struct{} `json:"ExposedPorts,omitempty"`
	Volumes      map[string]struct{} `json:"Volumes,omitempty"`
	StopSignal   string              `json:"StopSignal,omitempty"`

	extra map[string]json.RawMessage
}

// RootFS lists the uncompressed layer digests.
type RootFS struct {
	Type    string   `json:"type"`
	DiffIDs []string `json:"diff_ids"`
}

// ParseConfig reads a config blob.
func ParseConfig(b []byte) (*Config, error) {
	var c Config
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("image config: %w", err)
	}
	return &c, nil
}

// Platform is the config's os/architecture.
func (c *Config) Platform() Platform {
	return Platform{OS: c.OS, Arch: c.Architecture, Variant: c.Variant}
}

func (c *Config) UnmarshalJSON(b []byte) error {
	type plain Config
	return decodeKnown(b, (*plain)(c), &c.extra)
}

func (c Config) MarshalJSON() ([]byte, error) {
	type plain Config
	return withExtra(plain(c), c.extra)
}

func (c *ContainerConfig) UnmarshalJSON(b []byte) error {
	type plain ContainerConfig
	return decodeKnown(b, (*plain)(c), &c.extra)
}

func (c ContainerConfig) MarshalJSON() ([]byte, error) {
	type plain ContainerConfig
	return withExtra(plain(c), c.extra)
}

// decodeKnown decodes b into *v, starting from v's zero value, and keeps
// the keys no field of v names in *extra; on an error *v is left as it was.
func decodeKnown[T any](b []byte, v *T, extra *map[string]json.RawMessage) error {
	var p T
	if err := json.Unmarshal(b, &p); err != nil {
		return err
	}
	x, err := unknownKeys(b, reflect.TypeOf(p))
	if err != nil {
		return err
	}
	*v = p
	*extra = x
	return nil
}

// unknownKeys returns the object's keys that no field of t names, compared
// without case as encoding/json matches them.
func unknownKeys(b []byte, t reflect.Type) (map[string]json.RawMessage, error) {
	var all map[string]json.RawMessage
	if err := json.Unmarshal(b, &all); err != nil {
		return nil, err
	}
	known := map[string]bool{}
	for i := 0; i < t.NumField(); i++ {
		tag, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		if tag != "" && tag != "-" {
			known[strings.ToLower(tag)] = true
		}
	}
	var extra map[string]json.RawMessage
	for k, v := range all {
		if known[strings.ToLower(k)] {
			continue
		}
		if extra == nil {
			extra = map[string]json.RawMessage{}
		}
		extra[k] = v
	}
	return extra, nil
}

// withExtra marshals v and adds the kept keys beside its own.
func withExtra(v any, extra map[string]json.RawMessage) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil || len(extra) == 0 {
		return b, err
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	for k, x := range extra {
		if _, taken := m[k]; !taken {
			m[k] = x
		}
	}
	return json.Marshal(m)
}
