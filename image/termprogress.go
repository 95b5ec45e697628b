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
// (carriage return) as the layer comes in and ended with a newline. While
// several layers come in at once, the line shows each of them, in the
// order they started, with how far it is.
type TermProgress struct {
	W io.Writer

	mu     sync.Mutex
	sizes  map[string]int64
	done   map[string]int64
	active []string // layers started and not done, in order
}

const barWidth = 30

func shortDigest(d string) string {
	h := strings.TrimPrefix(d, "sha256:")
	if len(h) > 12 {
		h = h[:12]
	}
	return h
}

func percent(done, size int64) int {
	if size <= 0 {
		return 0
	}
	return int(min(done, size) * 100 / size)
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
		pct = percent(done, size)
	}
	fmt.Fprintf(p.W, "\r\033[K%s [%s%s] %3d%% %s%s", shortDigest(layer), strings.Repeat("=", filled), strings.Repeat(" ", barWidth-filled), pct, humanBytes(done), end)
}

// redraw draws the line of the layers coming in: one layer's bar, or
// every layer's share when there are several.
func (p *TermProgress) redraw() {
	switch len(p.active) {
	case 0:
	case 1:
		p.draw(p.active[0], p.done[p.active[0]], "")
	default:
		var b strings.Builder
		b.WriteString("\r\033[K")
		var total int64
		for i, l := range p.active {
			if i > 0 {
				b.WriteString("  ")
			}
			fmt.Fprintf(&b, "%s %3d%%", shortDigest(l), percent(p.done[l], p.sizes[l]))
			total += p.done[l]
		}
		fmt.Fprintf(&b, "  %s", humanBytes(total))
		io.WriteString(p.W, b.String())
	}
}

func (p *TermProgress) Start(_, layer string, size int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.sizes == nil {
		p.sizes, p.done = map[string]int64{}, map[string]int64{}
	}
	p.sizes[layer], p.done[layer] = size, 0
	p.active = append(p.active, layer)
	p.redraw()
}

func (p *TermProgress) Advance(_, layer string, done int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done == nil {
		p.sizes, p.done = map[string]int64{}, map[string]int64{}
	}
	p.done[layer] = done
	p.redraw()
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
	delete(p.done, layer)
	for i, l := range p.active {
		if l == layer {
			p.active = append(p.active[:i], p.active[i+1:]...)
			break
		}
	}
	p.redraw()
}

func (p *TermProgress) Skipped(_, layer string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.active) > 0 {
		io.WriteString(p.W, "\r\033[K") // the line of the layers coming in
	}
	fmt.Fprintf(p.W, "%s already present\n", shortDigest(layer))
	p.redraw()
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
