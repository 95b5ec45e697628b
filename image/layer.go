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
	// checked: the source checks the blob against its digest and size
	// itself, failing the read at its end (go-containerregistry's
	// registry client does), so it is not hashed a second time here.
	checked bool
}

// verifiedLayer is a layer whose bytes were all checked: the blob as
// stored (compressed or not) in a temporary file, and the whiteouts its
// tar holds.
type verifiedLayer struct {
	f         *os.File
	whiteouts []whiteout
}

// tar reads the layer's tar stream again from the temporary file.
func (v *verifiedLayer) tar() (io.ReadCloser, error) {
	if _, err := v.f.Seek(0, io.SeekStart); err != nil {
		return nil, err
	}
	return decompress(v.f)
}

func (v *verifiedLayer) close() { v.f.Close(); os.Remove(v.f.Name()) }

// verifyLayer reads a whole layer once: it keeps the blob in a temporary
// file in dir, checks it against its digest (when src.compressed) and
// its tar against the config's diff_id, and checks every name in it,
// collecting the whiteouts. Nothing of a layer is extracted until all of
// it is known good. The file keeps the compressed form, so a pull writes
// the layer's size once to the temporary file and once extracted.
func verifyLayer(ctx context.Context, src layerSource, dir string, count func(io.Reader) io.Reader) (*verifiedLayer, error) {
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
		return nil, fmt.Errorf("open layer: %w", classifyRemote(err))
	}
	defer rc.Close()
	f, err := os.CreateTemp(dir, "layer-*.blob")
	if err != nil {
		return nil, err
	}
	v := &verifiedLayer{f: f}
	fail := func(err error) (*verifiedLayer, error) { v.close(); return nil, err }
	name := digestOf(src.layer)

	var blob *hashingReader
	var in io.Reader = ctxReader{ctx, count(rc)}
	if src.compressed && !src.checked {
		blob = &hashingReader{r: in, h: sha256.New()}
		in = blob
	}
	stored := io.TeeReader(in, f)
	buf := make([]byte, 1<<20)
	var (
		scanErr error
		diffID  string
	)
	dr, derr := decompress(stored)
	if derr != nil {
		scanErr = derr
	} else {
		diff := &hashingReader{r: dr, h: sha256.New()}
		v.whiteouts, scanErr = scanLayer(diff)
		if scanErr == nil {
			// The end-of-archive blocks and any padding count too.
			_, scanErr = io.CopyBuffer(io.Discard, diff, buf)
		}
		diffID = diff.digest()
		dr.Close()
	}
	if errors.Is(scanErr, context.Canceled) || errors.Is(scanErr, context.DeadlineExceeded) {
		return fail(scanErr)
	}
	// Whatever the tar said, read the blob to its end: its digest is the
	// first judge of bytes that failed to decompress.
	if _, err := io.CopyBuffer(io.Discard, stored, buf); err != nil {
		return fail(fmt.Errorf("layer %s: %w", name, markDigest(classifyRemote(err))))
	}
	if blob != nil {
		if got := blob.digest(); got != name {
			return fail(fmt.Errorf("layer blob %s: got bytes of %s: %w", name, got, ErrDigest))
		}
	}
	if errors.Is(scanErr, ErrUnsafePath) {
		return fail(scanErr)
	}
	if scanErr != nil {
		return fail(fmt.Errorf("layer %s: %w", name, markDigest(classifyRemote(scanErr))))
	}
	if diffID != src.diffID {
		return fail(fmt.Errorf("layer %s: uncompressed content is %s, config's diff_id says %s: %w", name, diffID, src.diffID, ErrDigest))
	}
	return v, nil
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
