package httpapi

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	sse "github.com/r3labs/sse/v2"
	backoff "gopkg.in/cenkalti/backoff.v1"
)

// ErrStreamEnded is what a followed stream reports when the server ended
// it (shutdown, eviction); the client then reconnects and resumes.
var ErrStreamEnded = errors.New("sse: stream ended by the server")

// NewStreamClient returns r3labs' SSE client set up to follow
// GET /api/stream without gaps:
//
//   - r3labs parses whatever is left when a connection breaks as if it were
//     a whole event and stores its id as Last-Event-ID, so a frame cut in
//     the middle would make the next connection resume after an event it
//     never delivered. The response body is wrapped so that the parser only
//     ever sees complete frames.
//   - r3labs treats a clean end of the response as success and stops; the
//     wrapper turns it into ErrStreamEnded so the client reconnects.
//   - Reconnects wait retry (constant) and stop when ctx is done; a 4xx
//     answer other than 429 stops them (it would not change on retry).
//   - Frames may be large (a snapshot of every slot): the buffer is 16 MiB.
//
// Follow it with client.SubscribeWithContext(ctx, "", handler).
func NewStreamClient(ctx context.Context, url string, hc *http.Client, retry time.Duration) *sse.Client {
	c := sse.NewClient(url, sse.ClientMaxBufferSize(16<<20))
	if hc != nil {
		c.Connection = hc
	}
	if retry <= 0 {
		retry = time.Second
	}
	c.ReconnectStrategy = backoff.WithContext(backoff.NewConstantBackOff(retry), ctx)
	c.ResponseValidator = func(_ *sse.Client, resp *http.Response) error {
		if resp.StatusCode != http.StatusOK {
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
			resp.Body.Close()
			err := fmt.Errorf("stream answered %s: %s", resp.Status, bytes.TrimSpace(body))
			if resp.StatusCode >= 400 && resp.StatusCode < 500 && resp.StatusCode != http.StatusTooManyRequests {
				return backoff.Permanent(err)
			}
			return err
		}
		resp.Body = &frameGuard{r: resp.Body}
		return nil
	}
	return c
}

// frameGuard releases bytes of an SSE body only up to the end of the last
// complete frame ("\n\n"); an incomplete tail is dropped when the body ends.
type frameGuard struct {
	r       io.ReadCloser
	pending []byte // read, not yet known to be whole frames
	ready   []byte // whole frames, not yet handed out
	scratch []byte
	err     error
}

func (g *frameGuard) Read(p []byte) (int, error) {
	for len(g.ready) == 0 {
		if g.err != nil {
			return 0, g.err
		}
		if g.scratch == nil {
			g.scratch = make([]byte, 32<<10)
		}
		n, err := g.r.Read(g.scratch)
		g.pending = append(g.pending, g.scratch[:n]...)
		if i := bytes.LastIndex(g.pending, []byte("\n\n")); i >= 0 {
			g.ready = append(g.ready, g.pending[:i+2]...)
			g.pending = append(g.pending[:0], g.pending[i+2:]...)
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = ErrStreamEnded
			}
			g.err = err
		}
	}
	n := copy(p, g.ready)
	g.ready = g.ready[n:]
	return n, nil
}

func (g *frameGuard) Close() error { return g.r.Close() }
