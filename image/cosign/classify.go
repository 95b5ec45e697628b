package cosign

import (
	"errors"
	"net/http"

	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"github.com/legionbsd/legion/image"
)

// classify marks a missing signature tag as image.ErrNotFound.
func classify(err error) error {
	var te *transport.Error
	if errors.As(err, &te) {
		if te.StatusCode == http.StatusNotFound {
			return errors.Join(image.ErrNotFound, err)
		}
		for _, d := range te.Errors {
			if d.Code == transport.ManifestUnknownErrorCode || d.Code == transport.NameUnknownErrorCode {
				return errors.Join(image.ErrNotFound, err)
			}
		}
	}
	return err
}
