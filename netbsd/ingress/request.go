package ingress

import (
	"bytes"
	"net/http"
	"net/textproto"
	"net/url"
)

// parseLaneRequest reads a request head (headLength's) as http.ReadRequest
// would, for the requests a lane takes most: GET, HEAD or OPTIONS in
// origin form over HTTP/1.1, with one Host, no body and no line net/http
// would fold, refuse or complete (FuzzLaneRequest holds the two equal).
// False for anything else, which the lane then reads with
// http.ReadRequest.
//
// Why: a client sends the same fields on each request of a connection
// (User-Agent, Accept...); words keeps their strings, so they are made
// once per connection rather than once per request, and the header map
// is filled without textproto's reader.
func parseLaneRequest(head []byte, words *laneWords) (*http.Request, bool) {
	line, rest := nextLine(head)
	method, target, ok := requestLine(line)
	if !ok {
		return nil, false
	}
	uri := words.value(target)
	u, err := url.ParseRequestURI(uri)
	if err != nil || u.Host != "" {
		return nil, false
	}
	// Sized for the fields as textproto sizes its map: one slice of
	// values for all, cut up per name.
	n := bytes.Count(rest, []byte{'\n'})
	h := make(http.Header, n)
	values := make([]string, n)
	var host string
	hosts, pragma, cacheControl := 0, false, false
	for {
		key, value, more, ok := nextField(rest)
		if !ok {
			return nil, false
		}
		if key == nil {
			break
		}
		rest = more
		k, v := words.key(key), words.value(value)
		switch k {
		case "Host":
			// Request.Host, not a field (as ReadRequest has it).
			hosts, host = hosts+1, v
			continue
		case "Content-Length", "Transfer-Encoding":
			return nil, false // a body, or a length to look at: net/http's
		case "Connection":
			// Only keep-alive: close or names of fields to drop are for
			// net/http's reading.
			if closes, names := connectionTokens(value); closes || names {
				return nil, false
			}
		case "Pragma":
			pragma = true // net/http may add a Cache-Control
		case "Cache-Control":
			cacheControl = true
		}
		if vv, seen := h[k]; seen {
			h[k] = append(vv, v)
		} else {
			values[0] = v
			h[k], values = values[:1:1], values[1:]
		}
	}
	if hosts != 1 || pragma && !cacheControl {
		return nil, false
	}
	return &http.Request{
		Method:     method,
		URL:        u,
		Proto:      "HTTP/1.1",
		ProtoMajor: 1,
		ProtoMinor: 1,
		Header:     h,
		Body:       http.NoBody,
		Host:       host,
		RequestURI: uri,
	}, true
}

// requestLine splits "METHOD /target HTTP/1.1", for the methods a lane
// takes and a target in origin form; false for anything else.
func requestLine(line []byte) (method string, target []byte, ok bool) {
	sp := bytes.IndexByte(line, ' ')
	if sp < 0 {
		return "", nil, false
	}
	switch string(line[:sp]) {
	case http.MethodGet:
		method = http.MethodGet
	case http.MethodHead:
		method = http.MethodHead
	case http.MethodOptions:
		method = http.MethodOptions
	default:
		return "", nil, false
	}
	target, proto, ok := bytes.Cut(line[sp+1:], []byte{' '})
	if !ok || string(proto) != "HTTP/1.1" || len(target) == 0 || target[0] != '/' {
		return "", nil, false
	}
	return method, target, true
}

// laneWords are the strings of a connection's field names (in canonical
// form) and values, kept for its next requests, up to maxLaneWords each
// (a client sending new ones on each request gets them made each time).
type laneWords struct {
	keys, values map[string]string
}

const maxLaneWords = 32

func (w *laneWords) key(b []byte) string {
	if s, ok := w.keys[string(b)]; ok {
		return s
	}
	s := textproto.CanonicalMIMEHeaderKey(string(b))
	if w.keys == nil {
		w.keys = make(map[string]string)
	}
	if len(w.keys) < maxLaneWords {
		w.keys[string(b)] = s
	}
	return s
}

func (w *laneWords) value(b []byte) string {
	if s, ok := w.values[string(b)]; ok {
		return s
	}
	s := string(b)
	if w.values == nil {
		w.values = make(map[string]string)
	}
	if len(w.values) < maxLaneWords {
		w.values[s] = s
	}
	return s
}
