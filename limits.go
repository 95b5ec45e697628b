package legion

import "fmt"

// Limits on what a user may write. Each is checked by admission and
// refused with the limit named; one object beyond them could otherwise
// stall the cluster (a Raft entry too large to replicate) or a node (a
// command line too long to exec).
const (
	// MaxObjectSize bounds an admitted object's JSON encoding (metadata,
	// labels and normalised spec), as etcd bounds a request by default.
	// The store's largest entry is derived from it (cluster/store), so it
	// stays far below what managers can send each other.
	MaxObjectSize = 1 << 20

	// MaxLabels bounds the labels of an object and of a selector: enough
	// to describe, few enough that matching stays cheap.
	MaxLabels = 64
	// Label keys and values follow Kubernetes: an optional DNS-subdomain
	// prefix, a name of one DNS label's length, a value of the same.
	MaxLabelPrefix = 253
	MaxLabelName   = 63
	MaxLabelValue  = 63

	// MaxContainers bounds a pod's containers, and separately its init
	// containers: every one is a jail on the node.
	MaxContainers = 32
	// MaxEnv bounds a container's environment variables.
	MaxEnv = 1024
	// MaxArgs bounds a container's command, its args and an exec probe's
	// command, each.
	MaxArgs = 1024
	// MaxExecBytes bounds what a container's command, args and environment
	// take together at exec (each string with its NUL, "name=value" for a
	// variable): half of FreeBSD's ARG_MAX (512 KiB on 64-bit), leaving
	// room for what the image's config adds.
	MaxExecBytes = 256 << 10
	// MaxPorts bounds a container's ports and a service's ports.
	MaxPorts = 128
	// MaxVolumes bounds a pod's volumes and a container's mounts (volume
	// mounts, secret files and config files, each).
	MaxVolumes = 64
	// MaxPullSecrets bounds a pod's image pull secrets.
	MaxPullSecrets = 16
	// MaxHeaders bounds the headers an HTTP probe sends.
	MaxHeaders = 32
	// MaxPlacementTerms bounds each list of a placement (constraints,
	// preferences, tolerations, affinity, anti-affinity) and a node's
	// taints: the scheduler checks each against every node.
	MaxPlacementTerms = 64
	// MaxPolicyTerms bounds a network policy's rules, a rule's peers and
	// a rule's ports: each becomes pf rules on every node.
	MaxPolicyTerms = 64
	// MaxPolicyKeys bounds an image policy's repository patterns and keys.
	MaxPolicyKeys = 64
	// MaxPluginOptions bounds a plugin volume's options.
	MaxPluginOptions = 64

	// MaxPath is the longest path a user gives (mount targets, working
	// directory, file targets): FreeBSD's PATH_MAX.
	MaxPath = 1024
	// MaxText bounds a free-text field the model does not otherwise parse
	// (user, NFS server and options, iSCSI portal and target, header
	// values, probe paths, ACME e-mail and directory).
	MaxText = 4096
	// MaxUser bounds a RoleBinding's user: X.509's upper bound for the
	// common name a user's certificate carries.
	MaxUser = 64
	// MaxID is the largest user or group id (FreeBSD's uid_t is 32 bits,
	// but ids above 2^31-1 break too many tools to be worth admitting).
	MaxID = 1<<31 - 1

	// Image references follow the distribution grammar: a name (registry
	// and repository) of at most 255 characters, then a tag of at most
	// 128 or a digest of at most sha512's length.
	MaxImageName      = 255
	MaxImageTag       = 128
	MaxImageReference = MaxImageName + max(len(":")+MaxImageTag, len("@sha512:")+128)
)

// MaxManifestSize bounds a manifest file or standard input the CLI reads:
// room for many objects at the object limit, and YAML's overhead, while a
// runaway file is refused by its size before it is read.
const MaxManifestSize = 16 * MaxObjectSize

// withinCount adds an error when a list of n things is longer than max and
// reports whether it is within the limit.
func withinCount(n, max int, p, what string, errs *ErrorList) bool {
	if n <= max {
		return true
	}
	errs.add(p, "%d %s, at most %d allowed", n, what, max)
	return false
}

// withinLength adds an error when s is longer than max bytes and reports
// whether it is within the limit. The text itself is not quoted: it may be
// the huge thing refused.
func withinLength(s string, max int, p string, errs *ErrorList) bool {
	if len(s) <= max {
		return true
	}
	errs.add(p, "%d characters, at most %d allowed", len(s), max)
	return false
}

// lengthError is withinLength for checks that return an error.
func lengthError(s string, max int) error {
	if len(s) <= max {
		return nil
	}
	return fmt.Errorf("%d characters, at most %d allowed", len(s), max)
}

// admitSize refuses an object whose encoding is over MaxObjectSize. It
// runs last, on the normalised object: defaults can make an object larger
// than it was written.
func admitSize(o Object, errs *ErrorList) {
	size, err := encodedLen(o)
	if err != nil {
		errs.add("", "encoding the object: %v", err)
		return
	}
	if size > MaxObjectSize {
		errs.add("", "the object is %d bytes encoded, at most %d (1 MiB) allowed", size, MaxObjectSize)
	}
}
