package legion

// Secret holds one value, given as base64 data or as text and stored as
// data. Containers get it as a file or an environment variable.
type Secret struct {
	Header
	Spec SecretSpec `json:"spec"`
}

// Config is a Secret that is not secret: the same shape, other defaults
// (/run/configs/<name>), readable with the view role.
type Config struct {
	Header
	Spec SecretSpec `json:"spec"`
}

// SecretSpec is the value of a Secret or Config.
type SecretSpec struct {
	Data []byte `json:"data,omitempty"`
	Text string `json:"text,omitempty"` // admission moves it into Data
}

// MaxValueSize is the largest Secret or Config value.
const MaxValueSize = 500 << 10
