package pki

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base32"
	"fmt"
	"strings"
)

// TokenPrefix starts every join token; the 1 is the token format.
const TokenPrefix = "LGN-1-"

// Token is a parsed join token.
type Token struct {
	Digest string // the CA's digest (see Digest)
	Secret string
}

// String formats the token as LGN-1-<digest>-<secret>.
func (t Token) String() string { return TokenPrefix + t.Digest + "-" + t.Secret }

// NewSecret makes a token secret: 160 random bits in lower-case base32.
func NewSecret() string {
	b := make([]byte, 20)
	if _, err := rand.Read(b); err != nil {
		panic(err) // the system's random source failed
	}
	return strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(b))
}

// ParseToken reads LGN-1-<digest>-<secret>.
func ParseToken(s string) (Token, error) {
	s = strings.TrimSpace(s)
	rest, ok := strings.CutPrefix(s, TokenPrefix)
	if !ok {
		return Token{}, fmt.Errorf("join token: expected it to start with %s", TokenPrefix)
	}
	digest, secret, ok := strings.Cut(rest, "-")
	if !ok || len(digest) != 52 || secret == "" || strings.Contains(secret, "-") {
		return Token{}, fmt.Errorf("join token: expected %s<52-character CA digest>-<secret>", TokenPrefix)
	}
	return Token{Digest: digest, Secret: secret}, nil
}

// SecretMatches compares a presented secret with the held one in constant
// time.
func SecretMatches(held, presented string) bool {
	return subtle.ConstantTimeCompare([]byte(held), []byte(presented)) == 1
}
