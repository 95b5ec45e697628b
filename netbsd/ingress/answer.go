package ingress

import (
	"bufio"
	"bytes"

	"golang.org/x/net/http/httpguts"
)

// A lane passes the usual backend answer on as it lies in the backend
// connection's buffer, without http.ReadResponse: a status of 200 to 599
// (but 204 and 304) with a Content-Length, or any to a HEAD, over
// HTTP/1.1, whose head fits the buffer. Parsing into an http.Response
// (a header map, a string per field, the body's readers) was a fifth of
// the proxy's CPU time in user space, the largest part.
//
// It takes only what http.ReadResponse reads alike (FuzzAnswerHead holds
// them equal), and leaves the rest to it: another status or version,
// folded or malformed lines, several or no Content-Length, a
// Transfer-Encoding or Trailer, a Connection naming other headers, and
// "Pragma: no-cache" without Cache-Control (which net/http completes).

// answerHead is what a lane needs to know of an answer's head to pass it
// on.
type answerHead struct {
	status int
	length int64 // Content-Length, -1 when none (a HEAD's answer only)
	close  bool  // the backend closes the connection after it
	date   bool  // the backend sent a Date
	// fields is where the field lines lie in the head; drop has bit i
	// set for the field i not passed on (hop-by-hop). verbatim: they are
	// all passed on, as the lane would write them ("Name: value\r\n",
	// the name in canonical form), so the lane writes them at once.
	fields   [2]int
	drop     uint64
	verbatim bool
}

// maxAnswerFields is the most fields of an answer a lane passes on as it
// is (drop's bits).
const maxAnswerFields = 64

// parseAnswerHead reads head (through its empty line, as headLength finds
// it), the answer to a request of method; false when the lane leaves it
// to http.ReadResponse.
func parseAnswerHead(head []byte, method string) (answerHead, bool) {
	a := answerHead{length: -1}
	line, rest := nextLine(head)
	// "HTTP/1.1 " and three digits, then the end or a space and the
	// reason, which is not passed on (the status is written anew).
	if len(line) < 12 || string(line[:9]) != "HTTP/1.1 " || len(line) > 12 && line[12] != ' ' {
		return a, false
	}
	for _, c := range line[9:12] {
		if c < '0' || c > '9' {
			return a, false
		}
		a.status = a.status*10 + int(c-'0')
	}
	if a.status < 200 || a.status > 599 || a.status == 204 || a.status == 304 {
		return a, false
	}
	var firstPragma []byte
	pragma, cacheControl := false, false
	a.fields[0] = len(head) - len(rest)
	a.verbatim = true
	for i := 0; ; i++ {
		key, value, more, ok := nextField(rest)
		if !ok || i == maxAnswerFields && key != nil {
			return a, false
		}
		if key == nil {
			a.fields[1] = len(head) - len(rest)
			break
		}
		// "Name: value\r\n" with nothing around the value.
		line := rest[:len(rest)-len(more)]
		a.verbatim = a.verbatim && len(line) == len(key)+len(value)+4 && line[len(key)+1] == ' ' &&
			line[len(line)-2] == '\r' && isCanonicalKey(key)
		rest = more
		kind := fieldKind(key)
		if kind == fieldConnection || kind == fieldHop {
			a.drop |= 1 << i
			a.verbatim = false
		}
		switch kind {
		case fieldContentLength:
			if a.length >= 0 || len(value) == 0 || len(value) > 18 {
				return a, false
			}
			a.length = 0
			for _, c := range value {
				if c < '0' || c > '9' {
					return a, false
				}
				a.length = a.length*10 + int64(c-'0')
			}
		case fieldTransferEncoding, fieldTrailer, fieldClose:
			return a, false
		case fieldConnection:
			closes, names := connectionTokens(value)
			if names {
				return a, false // names headers to drop
			}
			a.close = a.close || closes
		case fieldDate:
			a.date = true
		case fieldPragma:
			if !pragma {
				pragma, firstPragma = true, value
			}
		case fieldCacheControl:
			cacheControl = true
		}
	}
	if pragma && !cacheControl && string(firstPragma) == "no-cache" {
		return a, false
	}
	if a.length < 0 && method != "HEAD" {
		return a, false
	}
	return a, true
}

// nextLine is the line at the start of b, without its "\n" or "\r\n", and
// what follows it.
func nextLine(b []byte) (line, rest []byte) {
	i := bytes.IndexByte(b, '\n')
	if i < 0 {
		return b, nil
	}
	line, rest = b[:i], b[i+1:]
	if len(line) > 0 && line[len(line)-1] == '\r' {
		line = line[:len(line)-1]
	}
	return line, rest
}

// nextField is the header field at the start of b, its value without
// the white space around it, and what follows it; a nil key at the empty
// line that ends the head. False for a line a lane does not pass on as it
// is: folded, without a colon, with a name that is not a token, or with
// a byte a value may not hold.
func nextField(b []byte) (key, value, rest []byte, ok bool) {
	line, rest := nextLine(b)
	if len(line) == 0 {
		return nil, nil, rest, true
	}
	colon := bytes.IndexByte(line, ':')
	if colon < 1 {
		return nil, nil, nil, false
	}
	key, value = line[:colon], bytes.Trim(line[colon+1:], " \t")
	for _, c := range key {
		if !httpguts.IsTokenRune(rune(c)) {
			return nil, nil, nil, false
		}
	}
	for _, c := range value {
		if c < ' ' && c != '\t' || c == 0x7f {
			return nil, nil, nil, false
		}
	}
	return key, value, rest, true
}

// connectionTokens reads a Connection value: whether it says close, and
// whether it names anything but close and keep-alive (fields to drop).
func connectionTokens(value []byte) (closes, names bool) {
	for tok := range bytes.SplitSeq(value, []byte(",")) {
		switch tok = bytes.Trim(tok, " \t"); {
		case len(tok) == 0, asciiEqualFold(tok, "keep-alive"):
		case asciiEqualFold(tok, "close"):
			closes = true
		default:
			names = true
		}
	}
	return closes, names
}

// The fields a lane looks at or drops.
const (
	fieldOther = iota
	fieldContentLength
	fieldTransferEncoding
	fieldTrailer
	fieldConnection
	fieldDate
	fieldPragma
	fieldCacheControl
	fieldHop   // hop-by-hop, dropped (hopHeaders')
	fieldClose // "Close", which "Connection: close" would name
)

// fieldKind is which of the fields a lane looks at key is, whatever its
// case.
func fieldKind(key []byte) int {
	is := func(name string) bool { return asciiEqualFold(key, name) }
	switch len(key) {
	case 2:
		if is("te") {
			return fieldHop
		}
	case 4:
		if is("date") {
			return fieldDate
		}
	case 5:
		if is("close") {
			return fieldClose
		}
	case 6:
		if is("pragma") {
			return fieldPragma
		}
	case 7:
		switch {
		case is("trailer"):
			return fieldTrailer
		case is("upgrade"):
			return fieldHop
		}
	case 10:
		switch {
		case is("connection"):
			return fieldConnection
		case is("keep-alive"):
			return fieldHop
		}
	case 13:
		if is("cache-control") {
			return fieldCacheControl
		}
	case 14:
		if is("content-length") {
			return fieldContentLength
		}
	case 16:
		if is("proxy-connection") {
			return fieldHop
		}
	case 17:
		if is("transfer-encoding") {
			return fieldTransferEncoding
		}
	case 18:
		if is("proxy-authenticate") {
			return fieldHop
		}
	case 19:
		if is("proxy-authorization") {
			return fieldHop
		}
	}
	return fieldOther
}

// asciiEqualFold is whether b is lower, a lower-case ASCII name, in any
// case.
func asciiEqualFold(b []byte, lower string) bool {
	if len(b) != len(lower) {
		return false
	}
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != lower[i] {
			return false
		}
	}
	return true
}

// writeAnswerHead writes the head of an answer parseAnswerHead took, to
// the client: its fields but the hop-by-hop ones, names in canonical form,
// a Date when the backend sent none, and Connection: close when closing.
func (ln *lane) writeAnswerHead(head []byte, a answerHead, closing bool) {
	ln.writeStatusLine(a.status)
	if a.verbatim {
		ln.bw.Write(head[a.fields[0]:a.fields[1]])
		ln.endHead(a.date, a.status, closing)
		return
	}
	rest := head[a.fields[0]:a.fields[1]]
	for i := 0; len(rest) > 0; i++ {
		var key, value []byte
		key, value, rest, _ = nextField(rest) // checked by parseAnswerHead
		if a.drop&(1<<i) != 0 {
			continue
		}
		writeCanonicalKey(ln.bw, key)
		ln.bw.WriteString(": ")
		ln.bw.Write(value)
		ln.bw.WriteString("\r\n")
	}
	ln.endHead(a.date, a.status, closing)
}

// isCanonicalKey is whether a field name is in net/http's canonical form
// (textproto.CanonicalMIMEHeaderKey): upper case at the start and after
// each dash, lower case elsewhere.
func isCanonicalKey(key []byte) bool {
	upper := true
	for _, c := range key {
		if upper && 'a' <= c && c <= 'z' || !upper && 'A' <= c && c <= 'Z' {
			return false
		}
		upper = c == '-'
	}
	return true
}

// writeCanonicalKey writes a field name in canonical form.
func writeCanonicalKey(bw *bufio.Writer, key []byte) {
	if isCanonicalKey(key) {
		bw.Write(key)
		return
	}
	upper := true
	for _, c := range key {
		if upper && 'a' <= c && c <= 'z' {
			c -= 'a' - 'A'
		} else if !upper && 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		bw.WriteByte(c)
		upper = c == '-'
	}
}
