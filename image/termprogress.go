package image

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"

	"golang.org/x/term"
)

// NewProgress picks a bar per layer when w is a terminal and plain log
// lines otherwise.
func NewProgress(w io.Writer, log *slog.Logger) Progress {
	if f, ok := w.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		return &TermProgress{W: w}
	}
	return &LogProgress{Log: log}
}

// TermProgress draws one bar per layer on a terminal, redrawn in place
// (carriage return) as the layer comes in and ended with a newline.
type TermProgress struct {
	W io.Writer

	mu    sync.Mutex
	sizes map[string]int64
}

const barWidth = 30

func shortDigest(d string) string {
	h := strings.TrimPrefix(d, "sha256:")
	if len(h) > 12 {
		h = h[:12]
	}
	return h
}

func (p *TermProgress) draw(layer string, done int64, end string) {
	size := p.sizes[layer]
	filled := 0
	pct := 0
	if size > 0 {
		if done > size {
			done = size
		}
		filled = int(done * barWidth / size)
		pct = int(done * 100 / size)
	}
	fmt.Fprintf(p.W, "\r\033[K%s [%s%s] %3d%% %s%s", shortDigest(layer), strings.Repeat("=", filled), strings.Repeat(" ", barWidth-filled), pct, humanBytes(done), end)
}

func (p *TermProgress) Start(_, layer string, size int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.sizes == nil {
		p.sizes = map[string]int64{}
	}
	p.sizes[layer] = size
	p.draw(layer, 0, "")
}

func (p *TermProgress) Advance(_, layer string, done int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.draw(layer, done, "")
}

func (p *TermProgress) Done(_, layer string, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err != nil {
		fmt.Fprintf(p.W, "\r\033[K%s failed: %v\n", shortDigest(layer), err)
	} else {
		p.draw(layer, p.sizes[layer], " done\n")
	}
	delete(p.sizes, layer)
}

func (p *TermProgress) Skipped(_, layer string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintf(p.W, "%s already present\n", shortDigest(layer))
}

func humanBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
