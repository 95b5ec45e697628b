package pki

import (
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"time"
)

// KeptCerts is how many of a node's newest certificates its record keeps.
// A renewed node's open connections still carry the certificate they were
// opened with (a renewal restarts nothing), so the ones before the newest
// stay accepted; a new handshake refuses them anyway once they expire.
const KeptCerts = 4

// NodeCerts records the certificates the cluster issued a node, so that a
// certificate naming the node is accepted only if it is one of them: a
// name alone proves nothing once anyone could have been signed for it.
type NodeCerts struct {
	Node  string       `json:"node"`
	Role  Role         `json:"role"`
	Certs []IssuedCert `json:"certificates"` // oldest first
}

// IssuedCert is one certificate of a node's record.
type IssuedCert struct {
	SHA256   string    `json:"sha256"` // of the DER, lower-case hex
	Serial   string    `json:"serial"` // hex, for reading alongside logs
	NotAfter time.Time `json:"notAfter"`
	// Authority is the key id of the CA that signed it, in hex, so the
	// leader sees when every node renewed under a rotated CA.
	Authority string `json:"authority,omitempty"`
	// Key is its public key's fingerprint (KeyFingerprint), so a join
	// asked again by the holder of that key is known (IssuedOnlyTo).
	// Records written before it have none.
	Key string `json:"key,omitempty"`
}

// NodeCertsPrefix starts the name of each node's record, a Config of the
// reserved namespace holding the record as JSON; no other record there
// starts so.
const NodeCertsPrefix = "node-cert-"

// NodeCertsConfig names node's record.
func NodeCertsConfig(node string) string { return NodeCertsPrefix + node }

// Fingerprint is the SHA-256 of a certificate's DER, in lower-case hex.
func Fingerprint(c *x509.Certificate) string {
	sum := sha256.Sum256(c.Raw)
	return hex.EncodeToString(sum[:])
}

// KeyFingerprint is the SHA-256 of a public key's DER (its
// SubjectPublicKeyInfo), in lower-case hex.
func KeyFingerprint(spki []byte) string {
	sum := sha256.Sum256(spki)
	return hex.EncodeToString(sum[:])
}

// NewNodeCerts starts the record of the node a certificate names.
func NewNodeCerts(c *x509.Certificate) *NodeCerts {
	id := IdentityOf(c)
	r := &NodeCerts{Node: id.Name, Role: id.Role}
	r.Add(c)
	return r
}

// Holds reports whether c is one of the node's recorded certificates.
func (r *NodeCerts) Holds(c *x509.Certificate) bool {
	fp := Fingerprint(c)
	return slices.ContainsFunc(r.Certs, func(ic IssuedCert) bool { return ic.SHA256 == fp })
}

// IssuedOnlyTo reports whether the record holds certificates, all of
// them issued for the public key of fingerprint key (KeyFingerprint).
func (r *NodeCerts) IssuedOnlyTo(key string) bool {
	if len(r.Certs) == 0 || key == "" {
		return false
	}
	for _, c := range r.Certs {
		if c.Key != key {
			return false
		}
	}
	return true
}

// Add records c (once), dropping the oldest beyond KeptCerts.
func (r *NodeCerts) Add(c *x509.Certificate) {
	if r.Holds(c) {
		return
	}
	r.Certs = append(r.Certs, IssuedCert{SHA256: Fingerprint(c), Serial: c.SerialNumber.Text(16), NotAfter: c.NotAfter,
		Authority: hex.EncodeToString(c.AuthorityKeyId), Key: KeyFingerprint(c.RawSubjectPublicKeyInfo)})
	if n := len(r.Certs); n > KeptCerts {
		r.Certs = slices.Delete(r.Certs, 0, n-KeptCerts)
	}
}

// ParseNodeCerts reads a record written by MarshalNodeCerts.
func ParseNodeCerts(data []byte) (*NodeCerts, error) {
	var r NodeCerts
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("node certificate record: expected JSON {node, role, certificates}: %w", err)
	}
	return &r, nil
}

// Marshal encodes the record.
func (r *NodeCerts) Marshal() ([]byte, error) { return json.Marshal(r) }

// Under reports whether the node's newest certificate was signed by ca.
func (r *NodeCerts) Under(ca *x509.Certificate) bool {
	return len(r.Certs) > 0 && r.Certs[len(r.Certs)-1].Authority == hex.EncodeToString(ca.SubjectKeyId)
}
