package ingress

import "sync"

// copyBufferSize is ReverseProxy's own copy buffer size.
const copyBufferSize = 32 << 10

// bufferPool lends the reverse proxies their body copy buffers: without
// one, httputil.ReverseProxy allocates 32 KiB per request, most of what
// a proxied request allocates, and the collector's work grows with the
// request rate.
type bufferPool struct{ pool sync.Pool }

func newBufferPool() *bufferPool {
	return &bufferPool{pool: sync.Pool{New: func() any { b := make([]byte, copyBufferSize); return &b }}}
}

func (p *bufferPool) Get() []byte { return *p.pool.Get().(*[]byte) }

func (p *bufferPool) Put(b []byte) {
	if cap(b) >= copyBufferSize {
		b = b[:copyBufferSize]
		p.pool.Put(&b)
	}
}
