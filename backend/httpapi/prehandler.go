package httpapi

import (
	"bytes"
	"encoding/json"
	"net"
	"strconv"
	"strings"
)

// net/http answers some requests before any handler runs — a malformed
// request line or header (400), headers over the limit (431), an unknown
// transfer encoding (501), an unsupported protocol version (505) — by
// writing a plain-text response straight to the connection. No hook
// changes that, so JSONErrors wraps the listener: a write that is exactly
// such an answer (status line + net/http's fixed error headers + text, in
// one write; handler responses always carry Date and a length) is rewritten
// into the API's error shape. Everything else passes unchanged.

// netHTTPErrorHeaders are the headers net/http's conn.serve writes with
// every pre-handler error (net/http/server.go, errorHeaders).
const netHTTPErrorHeaders = "\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n"

// JSONErrors wraps ln so that net/http's own pre-handler error answers are
// in the API's JSON error shape.
func JSONErrors(ln net.Listener) net.Listener { return jsonErrListener{ln} }

type jsonErrListener struct{ net.Listener }

func (l jsonErrListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &jsonErrConn{Conn: c}, nil
}

// jsonErrConn rewrites pre-handler error answers; Conn is the real
// connection (ConnContext hands that to handlers).
type jsonErrConn struct{ net.Conn }

func (c *jsonErrConn) Write(p []byte) (int, error) {
	if out, ok := rewritePreHandlerError(p); ok {
		if _, err := c.Conn.Write(out); err != nil {
			return 0, err
		}
		return len(p), nil
	}
	return c.Conn.Write(p)
}

// rewritePreHandlerError turns "HTTP/1.1 <code> <text><errorHeaders><body>"
// into the same status with a JSON error body.
func rewritePreHandlerError(p []byte) ([]byte, bool) {
	if !bytes.HasPrefix(p, []byte("HTTP/1.1 ")) {
		return nil, false
	}
	i := bytes.Index(p, []byte(netHTTPErrorHeaders))
	if i < 0 || bytes.Contains(p[:i], []byte("\r\n")) {
		return nil, false // not a lone status line before net/http's error headers
	}
	statusLine := string(p[len("HTTP/1.1 "):i])
	codeStr, _, _ := strings.Cut(statusLine, " ")
	status, err := strconv.Atoi(codeStr)
	if err != nil || status < 400 || status > 599 {
		return nil, false
	}
	code := CodeInvalid
	if status == 431 {
		code = CodeTooLarge
	}
	body, _ := json.Marshal(errorBody{Error: payloadOf(&Error{Code: code, Message: string(p[i+len(netHTTPErrorHeaders):])})})
	var b bytes.Buffer
	b.WriteString("HTTP/1.1 " + statusLine + "\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: ")
	b.WriteString(strconv.Itoa(len(body)))
	b.WriteString("\r\n\r\n")
	b.Write(body)
	return b.Bytes(), true
}
