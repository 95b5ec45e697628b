package legion

// RoleBinding gives a user (a certificate identity) a role in the
// binding's namespace.
type RoleBinding struct {
	Header
	Spec RoleBindingSpec `json:"spec"`
}

// Role is a built-in set of rights within a namespace.
type Role string

// Roles.
const (
	RoleView  Role = "view"  // read all but Secrets
	RoleEdit  Role = "edit"  // also Secrets, apply and delete
	RoleAdmin Role = "admin" // also the namespace's RoleBindings
)

// RoleBindingSpec binds a user to a role.
type RoleBindingSpec struct {
	User string `json:"user"`
	Role Role   `json:"role"`
}

// ImagePolicy requires images of matching repositories to be signed by
// one of its keys. It is cluster-scoped and set by the cluster admin only.
type ImagePolicy struct {
	Header
	Spec ImagePolicySpec `json:"spec"`
}

// ImagePolicyMode is what an image failing the policy does.
type ImagePolicyMode string

// Image policy modes.
const (
	PolicyEnforce ImagePolicyMode = "enforce" // hold the pod
	PolicyWarn    ImagePolicyMode = "warn"    // run it, saying what was found
)

// ImagePolicySpec names repository patterns, P-256 public keys in PEM and
// a mode. A pattern is registry[:port]/path with * for one segment and **
// for any number of whole segments.
type ImagePolicySpec struct {
	Repositories []string        `json:"repositories"`
	Keys         []string        `json:"keys"`
	Mode         ImagePolicyMode `json:"mode"`
}
