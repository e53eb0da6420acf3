package httpapi

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/slotkeeper/slotkeeper/backend/auth"
	"github.com/slotkeeper/slotkeeper/backend/slots"
	"github.com/slotkeeper/slotkeeper/events"
)

// stepLog records the order in which do reached each step, the read
// model's wait included.
type stepLog struct{ steps []string }

func (l *stepLog) add(s string) { l.steps = append(l.steps, s) }

// Head and WaitFor make stepLog the server's log and read model.
func (l *stepLog) Head(context.Context) (events.Position, error) { return 7, nil }
func (l *stepLog) WaitFor(_ context.Context, pos events.Position) error {
	l.add("wait")
	return nil
}

type cmdBody struct {
	N int `json:"n"`
}

// testCommand is a command whose every step records itself.
func testCommand(l *stepLog) command[cmdBody, int] {
	return command[cmdBody, int]{
		need:   func() error { l.add("need"); return nil },
		target: func(c echo.Context) (string, error) { l.add("target"); return pathName(c, "name") },
		allow: func(_ echo.Context, target string, in *cmdBody, a *slots.Actor) error {
			l.add("allow")
			if in.N < 0 {
				return invalidField("n", "n must not be negative")
			}
			if in.N == 403 {
				return forbidden(auth.Subject{ID: "user:x"}, auth.PermReleaseAny)
			}
			a.OwnOnly = true
			return nil
		},
		run: func(_ context.Context, a slots.Actor, target string, in cmdBody) (int, error) {
			l.add("run")
			if !a.OwnOnly {
				return 0, errors.New("allow's actor did not reach run")
			}
			if in.N == 409 {
				return 0, errf(CodeConflict, "slot %q is busy", target)
			}
			return in.N * 2, nil
		},
		answer: func(c echo.Context, target string, _ cmdBody, out int) error {
			l.add("answer")
			return c.JSON(http.StatusOK, map[string]any{"target": target, "out": out})
		},
	}
}

// runTestCommand runs cmd for a POST with the given content type, body and
// path name; it returns the HTTP status (statusOf for an error) and the
// steps taken.
func runTestCommand(t *testing.T, l *stepLog, cmd command[cmdBody, int], ctype, body, name string) int {
	t.Helper()
	s := &Server{log: slog.New(slog.DiscardHandler), d: Deps{Log: l, Waiter: l, WaitTimeout: time.Second}}
	req := httptest.NewRequest(http.MethodPost, "/api/x/"+name, strings.NewReader(body))
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	rec := httptest.NewRecorder()
	c := echo.New().NewContext(req, rec)
	c.SetParamNames("name")
	c.SetParamValues(name)
	if err := do(s, c, cmd); err != nil {
		return statusOf[toAPIError(err).Code]
	}
	return rec.Code
}

// TestCommandPrologueRefusals: every refusal of the prologue answers its
// 4xx and stops there: nothing after it runs, so nothing is appended and
// nothing waited for.
func TestCommandPrologueRefusals(t *testing.T) {
	const js = "application/json"
	for _, tc := range []struct {
		name        string
		off         bool // the feature is not enabled
		ctype, body string
		path        string
		optional    bool
		status      int
		steps       []string
	}{
		{name: "feature off", off: true, ctype: js, body: `{"n":1}`, path: "a", status: 404, steps: []string{"need"}},
		{name: "bad path", ctype: js, body: `{"n":1}`, path: "..%2Fetc", status: 400, steps: []string{"need", "target"}},
		{name: "not JSON", ctype: "text/plain", body: `{"n":1}`, path: "a", status: 415, steps: []string{"need", "target"}},
		{name: "form", ctype: "application/x-www-form-urlencoded", body: `n=1`, path: "a", status: 415, steps: []string{"need", "target"}},
		{name: "body required", ctype: js, body: ``, path: "a", status: 400, steps: []string{"need", "target"}},
		{name: "unknown field", ctype: js, body: `{"n":1,"x":2}`, path: "a", status: 400, steps: []string{"need", "target"}},
		{name: "wrong type", ctype: js, body: `{"n":"1"}`, path: "a", status: 400, steps: []string{"need", "target"}},
		{name: "two values", ctype: js, body: `{"n":1}{"n":2}`, path: "a", status: 400, steps: []string{"need", "target"}},
		{name: "not an object", ctype: js, body: `[1]`, path: "a", status: 400, steps: []string{"need", "target"}},
		{name: "too large", ctype: js, body: `{"n":1,"pad":"` + strings.Repeat("x", MaxBodyBytes) + `"}`, path: "a", status: 413, steps: []string{"need", "target"}},
		{name: "invalid input", ctype: js, body: `{"n":-1}`, path: "a", status: 400, steps: []string{"need", "target", "allow"}},
		{name: "not allowed", ctype: js, body: `{"n":403}`, path: "a", status: 403, steps: []string{"need", "target", "allow"}},
		{name: "command refused", ctype: js, body: `{"n":409}`, path: "a", status: 409, steps: []string{"need", "target", "allow", "run"}},
		{name: "done", ctype: js, body: `{"n":2}`, path: "a", status: 200, steps: []string{"need", "target", "allow", "run", "wait", "answer"}},
		{name: "optional body absent", ctype: js, body: ``, path: "a", optional: true, status: 200, steps: []string{"need", "target", "allow", "run", "wait", "answer"}},
		{name: "optional body still strict", ctype: js, body: `{"x":1}`, path: "a", optional: true, status: 400, steps: []string{"need", "target"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := &stepLog{}
			cmd := testCommand(l)
			cmd.optional = tc.optional
			if tc.off {
				cmd.need = func() error {
					l.add("need")
					return errf(CodeNotFound, "not enabled on this server")
				}
			}
			if got := runTestCommand(t, l, cmd, tc.ctype, tc.body, tc.path); got != tc.status {
				t.Errorf("status %d, want %d", got, tc.status)
			}
			if !slices.Equal(l.steps, tc.steps) {
				t.Errorf("steps %v, want %v", l.steps, tc.steps)
			}
		})
	}
}

// TestCommandNoWait: a command whose answer reads nothing of the read
// model answers without waiting for it.
func TestCommandNoWait(t *testing.T) {
	l := &stepLog{}
	cmd := testCommand(l)
	cmd.noWait = true
	if got := runTestCommand(t, l, cmd, "application/json", `{"n":2}`, "a"); got != 200 {
		t.Fatalf("status %d", got)
	}
	if want := []string{"need", "target", "allow", "run", "answer"}; !slices.Equal(l.steps, want) {
		t.Errorf("steps %v, want %v", l.steps, want)
	}
}
