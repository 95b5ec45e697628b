package pki

import "encoding/pem"

type pemBlock struct {
	typ string
	raw []byte // the block re-encoded as PEM
}

func nextPEM(data []byte) (*pemBlock, []byte) {
	b, rest := pem.Decode(data)
	if b == nil {
		return nil, rest
	}
	return &pemBlock{typ: b.Type, raw: pem.EncodeToMemory(b)}, rest
}
