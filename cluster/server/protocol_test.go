package server

import (
	"context"
	"strings"
	"testing"

	"google.golang.org/grpc/metadata"
)

func TestProtocolCheckSaysWhichSideToUpgrade(t *testing.T) {
	t.Parallel()
	cases := []struct {
		md   metadata.MD
		want string
	}{
		{metadata.Pairs(protocolKey, "1"), ""},
		{metadata.MD{}, ""}, // from before the handshake: protocol 1
		{metadata.Pairs(protocolKey, "2"), "upgrade this manager first"},
		{metadata.Pairs(protocolKey, "0"), "upgrade the calling manager first"},
	}
	for _, c := range cases {
		err := checkProtocol(metadata.NewIncomingContext(context.Background(), c.md))
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%v: %v", c.md, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%v: %v, want %q", c.md, err, c.want)
		}
	}
}
