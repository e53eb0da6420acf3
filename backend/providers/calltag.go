package providers

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"runtime/debug"
	"strconv"
	"sync"
)

// Headers every HTTP request to a provider carries (git sends them through
// http.extraHeader), so a provider's own logs tie each call to the job
// attempt that made it.
const (
	// HeaderJob is "<job id>/<attempt>", sent only for a tagged call.
	HeaderJob = "X-Slotkeeper-Job"
	// HeaderRequestID is fresh for every outside request (every git run).
	HeaderRequestID = "X-Request-Id"
)

// CallTag names the job attempt on whose behalf provider calls are made.
type CallTag struct {
	Job     string
	Attempt int
}

type callTagKey struct{}

// WithCallTag returns ctx carrying tag: every provider call made with the
// result names the job and attempt in its User-Agent and headers.
func WithCallTag(ctx context.Context, tag CallTag) context.Context {
	return context.WithValue(ctx, callTagKey{}, tag)
}

// CallTagFrom returns ctx's tag, if WithCallTag set one.
func CallTagFrom(ctx context.Context) (CallTag, bool) {
	tag, ok := ctx.Value(callTagKey{}).(CallTag)
	return tag, ok && tag.Job != ""
}

// String is the HeaderJob value, "<job id>/<attempt>". The job id is
// reduced to header-safe characters: it goes into headers and git argv.
func (t CallTag) String() string { return headerSafe(t.Job) + "/" + strconv.Itoa(t.Attempt) }

// headerSafe keeps letters, digits and ".-_:" (others become '_'), at most
// 64 of them: no header or argument can be split or forged through a tag.
func headerSafe(s string) string {
	b := []byte(s[:min(len(s), 64)])
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '-' || c == '_' || c == ':') {
			b[i] = '_'
		}
	}
	return string(b)
}

// version is the module version of the running binary, "dev" for a build
// without one.
var version = sync.OnceValue(func() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return headerSafe(bi.Main.Version)
	}
	return "dev"
})

// UserAgent is the User-Agent of calls made with ctx:
// "slotkeeper/<version> (job <id>; attempt <n>)", or "slotkeeper/<version>"
// for an untagged call.
func UserAgent(ctx context.Context) string {
	ua := "slotkeeper/" + version()
	if tag, ok := CallTagFrom(ctx); ok {
		ua += " (job " + headerSafe(tag.Job) + "; attempt " + strconv.Itoa(tag.Attempt) + ")"
	}
	return ua
}

// NewRequestID returns a fresh HeaderRequestID value: "<job>/<attempt>/"
// followed by 16 random hex digits for a tagged call, the random part alone
// otherwise.
func NewRequestID(ctx context.Context) string {
	var b [8]byte
	rand.Read(b[:])
	id := hex.EncodeToString(b[:])
	if tag, ok := CallTagFrom(ctx); ok {
		return tag.String() + "/" + id
	}
	return id
}
