package jail

import (
	"bytes"
	"context"
	"io"
	"path/filepath"
	"sync"
)

// Logs implements Runtime.
func (j *Jails) Logs(ctx context.Context, id string, opts LogOptions) (io.ReadCloser, error) {
	if _, err := j.records.Get(id); err != nil {
		return nil, err
	}
	f := &LogFollower{Path: filepath.Join(j.records.Path(id), LogFileName)}
	render := func() ([]byte, error) {
		recs, err := f.Next()
		var buf bytes.Buffer
		for _, r := range recs {
			if opts.Since.IsZero() || !r.Time.Before(opts.Since) {
				buf.WriteString(FormatRecord(r))
			}
		}
		return buf.Bytes(), err
	}
	first, err := render()
	if err != nil {
		return nil, err
	}
	if !opts.Follow {
		return io.NopCloser(bytes.NewReader(first)), nil
	}
	pr, pw := io.Pipe()
	stop := make(chan struct{})
	j.wg.Add(1)
	go func() {
		defer j.wg.Done()
		defer pw.Close()
		next := first
		for {
			if len(next) > 0 {
				if _, err := pw.Write(next); err != nil {
					return
				}
			}
			select {
			case <-ctx.Done():
				return
			case <-stop:
				return
			case <-j.clock.After(pollEvery):
			}
			if next, err = render(); err != nil {
				pw.CloseWithError(err)
				return
			}
		}
	}()
	return &stoppingReader{PipeReader: pr, stop: stop}, nil
}

type stoppingReader struct {
	*io.PipeReader
	stop chan struct{}
	once sync.Once
}

func (r *stoppingReader) Close() error {
	r.once.Do(func() { close(r.stop) })
	return r.PipeReader.Close()
}
