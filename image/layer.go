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

// verifiedLayer is a layer whose bytes were all checked: its tar,
// uncompressed, in a temporary file (when it is to be extracted), the blob
// as it came in another (when it is to be kept), and the whiteouts the tar
// holds.
type verifiedLayer struct {
	tarFile   *os.File
	blob      *os.File
	whiteouts []whiteout
}

// tar reads the layer's tar again from its temporary file.
func (v *verifiedLayer) tar() (*fileTar, error) {
	if v.tarFile == nil {
		return nil, errors.New("layer tar not kept")
	}
	return &fileTar{f: v.tarFile}, nil
}

func (v *verifiedLayer) close() {
	for _, f := range []*os.File{v.tarFile, v.blob} {
		if f != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}
}

// wantFiles says which temporary files verifyLayer writes.
type wantFiles struct {
	tar  bool // the uncompressed tar, to extract
	blob bool // the blob as it came, to keep
}

// verifyLayer reads a whole layer once: it checks the blob against its
// digest (when src.compressed; src.checked leaves that to the source)
// and its tar against the config's diff_id, and checks every name in it,
// collecting the whiteouts. Nothing of a layer is extracted until all of
// it is known good. It decompresses the layer once: the tar goes to a
// temporary file in dir as it is checked, and extraction reads it from
// there, copying file bodies file to file (copy_file_range), so a pull
// writes the layer's uncompressed size once to the temporary file and
// once extracted.
func verifyLayer(ctx context.Context, src layerSource, dir string, count func(io.Reader) io.Reader, want wantFiles) (*verifiedLayer, error) {
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
	v := &verifiedLayer{}
	fail := func(err error) (*verifiedLayer, error) { v.close(); return nil, err }
	// Written through buffers: the tar reader reads 512-byte blocks.
	var flush []*bufio.Writer
	tempFile := func(pattern string) (*os.File, *bufio.Writer, error) {
		f, err := os.CreateTemp(dir, pattern)
		if err != nil {
			return nil, nil, err
		}
		w := bufio.NewWriterSize(f, 256<<10)
		flush = append(flush, w)
		return f, w, nil
	}
	name := digestOf(src.layer)

	var blob *hashingReader
	var in io.Reader = ctxReader{ctx, count(rc)}
	if src.compressed && !src.checked {
		blob = &hashingReader{r: in, h: sha256.New()}
		in = blob
	}
	if want.blob && src.compressed {
		var w *bufio.Writer
		if v.blob, w, err = tempFile("layer-*.blob"); err != nil {
			return fail(err)
		}
		in = io.TeeReader(in, w)
	}
	buf := make([]byte, 1<<20)
	var (
		scanErr error
		diffID  string
	)
	dr, derr := decompress(in)
	if derr != nil {
		scanErr = derr
	} else {
		diff := &hashingReader{r: dr, h: sha256.New()}
		var tr io.Reader = diff
		if want.tar {
			var w *bufio.Writer
			if v.tarFile, w, err = tempFile("layer-*.tar"); err != nil {
				dr.Close()
				return fail(err)
			}
			tr = io.TeeReader(diff, w)
		}
		v.whiteouts, scanErr = scanLayer(tr)
		if scanErr == nil {
			// The end-of-archive blocks and any padding count too.
			_, scanErr = io.CopyBuffer(io.Discard, tr, buf)
		}
		diffID = diff.digest()
		dr.Close()
	}
	if errors.Is(scanErr, context.Canceled) || errors.Is(scanErr, context.DeadlineExceeded) {
		return fail(scanErr)
	}
	// Whatever the tar said, read the blob to its end: its digest is the
	// first judge of bytes that failed to decompress.
	if _, err := io.CopyBuffer(io.Discard, in, buf); err != nil {
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
	for _, w := range flush {
		if err := w.Flush(); err != nil {
			return fail(fmt.Errorf("layer %s: temporary file: %w", name, err))
		}
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
