package image

import (
	"io"
	"log/slog"
	"sync"
	"time"
)

// Progress hears how each layer of a pull goes. Calls for one layer come
// in order: Start, any number of Advance, then Done. A pull fetches
// several layers at once, so calls for different layers come from
// several goroutines at the same time.
type Progress interface {
	Start(image, layer string, size int64)
	Advance(image, layer string, done int64)
	Done(image, layer string, err error)
	// Skipped: the layer is already in the store.
	Skipped(image, layer string)
}

// LogProgress writes plain log lines: one at the start and end of each
// layer and one every Every bytes in between (10 MiB when zero).
type LogProgress struct {
	Log   *slog.Logger
	Every int64

	mu   sync.Mutex
	last map[string]int64
}

func (p *LogProgress) log() *slog.Logger {
	if p.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return p.Log
}

func (p *LogProgress) every() int64 {
	if p.Every > 0 {
		return p.Every
	}
	return 10 << 20
}

func (p *LogProgress) Start(image, layer string, size int64) {
	p.log().Info("pulling layer", "image", image, "layer", layer, "size", size)
}

func (p *LogProgress) Advance(image, layer string, done int64) {
	p.mu.Lock()
	if p.last == nil {
		p.last = map[string]int64{}
	}
	last := p.last[layer]
	due := done-last >= p.every()
	if due {
		p.last[layer] = done
	}
	p.mu.Unlock()
	if due {
		p.log().Info("pulling layer", "image", image, "layer", layer, "done", done)
	}
}

func (p *LogProgress) Done(image, layer string, err error) {
	p.mu.Lock()
	delete(p.last, layer)
	p.mu.Unlock()
	if err != nil {
		p.log().Warn("layer failed", "image", image, "layer", layer, "err", err)
		return
	}
	p.log().Info("layer ready", "image", image, "layer", layer)
}

func (p *LogProgress) Skipped(image, layer string) {
	p.log().Info("layer already present", "image", image, "layer", layer)
}

// noProgress is used when the caller gives none.
type noProgress struct{}

func (noProgress) Start(string, string, int64)   {}
func (noProgress) Advance(string, string, int64) {}
func (noProgress) Done(string, string, error)    {}
func (noProgress) Skipped(string, string)        {}

// countingReader reports bytes read, at most every 100 ms.
type countingReader struct {
	r            io.Reader
	n            int64
	last         time.Time
	image, layer string
	p            Progress
}

func (c *countingReader) Read(b []byte) (int, error) {
	n, err := c.r.Read(b)
	c.n += int64(n)
	if now := time.Now(); now.Sub(c.last) > 100*time.Millisecond || err == io.EOF {
		c.last = now
		c.p.Advance(c.image, c.layer, c.n)
	}
	return n, err
}
