package image

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
)

// ErrDigest is returned when bytes do not match the digest that names them:
// a blob against its descriptor, or a layer against its diff_id.
var ErrDigest = errors.New("digest mismatch")

var (
	gzipMagic = []byte{0x1f, 0x8b}
	zstdMagic = []byte{0x28, 0xb5, 0x2f, 0xfd}
)

// decompress returns the tar stream inside a layer blob, gzip, zstd or
// plain, told by its first bytes rather than the media type, which
// tools get wrong.
func decompress(r io.Reader) (io.ReadCloser, error) {
	br := bufio.NewReaderSize(r, 1<<20)
	head, _ := br.Peek(4)
	switch {
	case bytes.HasPrefix(head, gzipMagic):
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("gzip: %w", err)
		}
		return zr, nil
	case bytes.HasPrefix(head, zstdMagic):
		zr, err := zstd.NewReader(br, zstd.WithDecoderConcurrency(1))
		if err != nil {
			return nil, fmt.Errorf("zstd: %w", err)
		}
		return zr.IOReadCloser(), nil
	}
	return io.NopCloser(br), nil
}

type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(b []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(b)
}

// hashingReader hashes what passes through it.
type hashingReader struct {
	r io.Reader
	h hash.Hash
}

func (h *hashingReader) Read(b []byte) (int, error) {
	n, err := h.r.Read(b)
	h.h.Write(b[:n])
	return n, err
}

func (h *hashingReader) digest() string { return "sha256:" + hex.EncodeToString(h.h.Sum(nil)) }

// layerSource says how a layer's bytes are checked.
type layerSource struct {
	layer  v1.Layer
	diffID string
	// compressed: read the blob as stored and check it against its digest
	// (registry and OCI layout blobs); otherwise read the uncompressed
	// stream (docker save archives) and check only the diff_id.
	compressed bool
}

// unpackVerified writes a layer's tar to a temporary file in dir and
// checks it against its digest and diff_id before returning it, so
// nothing of a layer is extracted until all of it is known good. The file
// is removed when closed by the caller through the returned cleanup.
func unpackVerified(ctx context.Context, src layerSource, dir string, count func(io.Reader) io.Reader) (*os.File, func(), error) {
	var (
		rc  io.ReadCloser
		err error
	)
	if src.compressed {
		rc, err = src.layer.Compressed()
	} else {
		rc, err = src.layer.Uncompressed()
	}
	if err != nil {
		return nil, nil, fmt.Errorf("open layer: %w", classifyRemote(err))
	}
	defer rc.Close()

	f, err := os.CreateTemp(dir, "layer-*.tar")
	if err != nil {
		return nil, nil, err
	}
	cleanup := func() { f.Close(); os.Remove(f.Name()) }

	blob := &hashingReader{r: ctxReader{ctx, count(rc)}, h: sha256.New()}
	var tr io.Reader = blob
	if src.compressed {
		dr, err := decompress(blob)
		if err != nil {
			cleanup()
			return nil, nil, fmt.Errorf("layer %s: %w", digestOf(src.layer), err)
		}
		defer dr.Close()
		tr = dr
	}
	diff := &hashingReader{r: tr, h: sha256.New()}
	buf := make([]byte, 1<<20)
	if _, err := io.CopyBuffer(f, diff, buf); err != nil {
		cleanup()
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			return nil, nil, err
		}
		// Corrupt compressed data is most often a blob that is not what
		// its digest names: read the rest and say so when it is.
		if src.compressed {
			if _, derr := io.CopyBuffer(io.Discard, blob, buf); derr == nil {
				if got, want := blob.digest(), digestOf(src.layer); got != want {
					return nil, nil, fmt.Errorf("layer blob %s: got bytes of %s: %w (%v)", want, got, ErrDigest, err)
				}
			} else if markDigest(derr) != derr {
				return nil, nil, fmt.Errorf("layer %s: %w", digestOf(src.layer), markDigest(derr))
			}
		}
		return nil, nil, fmt.Errorf("layer %s: %w", digestOf(src.layer), markDigest(classifyRemote(err)))
	}
	if src.compressed {
		// Drain what the decompressor left (padding), so the blob
		// digest covers every byte served.
		if _, err := io.CopyBuffer(io.Discard, blob, buf); err != nil {
			cleanup()
			return nil, nil, fmt.Errorf("layer %s: %w", digestOf(src.layer), markDigest(classifyRemote(err)))
		}
		if got, want := blob.digest(), digestOf(src.layer); got != want {
			cleanup()
			return nil, nil, fmt.Errorf("layer blob %s: got bytes of %s: %w", want, got, ErrDigest)
		}
	}
	if got := diff.digest(); got != src.diffID {
		cleanup()
		return nil, nil, fmt.Errorf("layer %s: uncompressed content is %s, config's diff_id says %s: %w", digestOf(src.layer), got, src.diffID, ErrDigest)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		cleanup()
		return nil, nil, err
	}
	return f, cleanup, nil
}

func digestOf(l v1.Layer) string {
	d, err := l.Digest()
	if err != nil {
		return "(unknown digest)"
	}
	return d.String()
}

// markDigest marks go-containerregistry's own checks (its verifying reader
// fails at the end of a blob whose bytes or size are wrong) as ErrDigest;
// its error type is internal, so only the message tells.
func markDigest(err error) error {
	if err != nil && strings.Contains(err.Error(), "error verifying") {
		return errors.Join(ErrDigest, err)
	}
	return err
}
