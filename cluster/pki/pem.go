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

// blocksOf lists the contents (DER) of a PEM bundle's blocks of type typ,
// in order, passing over the others.
func blocksOf(data []byte, typ string) [][]byte {
	var out [][]byte
	for {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			return out
		}
		if b.Type == typ {
			out = append(out, b.Bytes)
		}
	}
}
