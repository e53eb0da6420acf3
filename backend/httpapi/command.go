package httpapi

import (
	"context"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/slotkeeper/slotkeeper/backend/slots"
)

// command declares one state-changing endpoint. Every command runs the same
// prologue, in this order (do):
//
//  1. need: the feature is enabled on this server (404 otherwise);
//  2. target: the path parameter naming what the command acts on;
//  3. the JSON body, decoded strictly into In (decodeBody's rules);
//  4. allow: the checks of the input and of the caller's permission;
//  5. run: the command itself, the first step that may append;
//  6. the wait for the read model, so the answer shows the command's effect;
//  7. answer.
//
// Every refusal before run is an error mapped to HTTP in one place
// (errors.go) and leaves the log as it was.
type command[In, Out any] struct {
	// need refuses when the feature is off (nil: always on).
	need func() error
	// target reads and checks the path parameter the command acts on
	// (nil: none; target is then "").
	target func(c echo.Context) (string, error)
	// optional accepts an empty body (In keeps its zero value); with no
	// body expected, In is noBody, which still refuses any field.
	optional bool
	// allow checks the input beyond its shape and the caller's permission;
	// it may narrow the actor (OwnOnly, Reason). nil: nothing to check.
	allow func(c echo.Context, target string, in *In, a *slots.Actor) error
	// run is the command.
	run func(ctx context.Context, a slots.Actor, target string, in In) (Out, error)
	// noWait skips the wait for the read model: the answer reads nothing
	// the command changed there (the waitlist waits for its own position).
	noWait bool
	// answer writes the success.
	answer func(c echo.Context, target string, in In, out Out) error
}

// do runs cmd for the request: the prologue, the command, the wait, the
// answer.
func do[In, Out any](s *Server, c echo.Context, cmd command[In, Out]) error {
	if cmd.need != nil {
		if err := cmd.need(); err != nil {
			return err
		}
	}
	var target string
	if cmd.target != nil {
		t, err := cmd.target(c)
		if err != nil {
			return err
		}
		target = t
	}
	var in In
	if err := decodeBody(c, &in, cmd.optional); err != nil {
		return err
	}
	a := actorOf(c)
	if cmd.allow != nil {
		if err := cmd.allow(c, target, &in, &a); err != nil {
			return err
		}
	}
	out, err := cmd.run(c.Request().Context(), a, target, in)
	if err != nil {
		return err
	}
	if !cmd.noWait {
		s.caughtUp(c)
	}
	return cmd.answer(c, target, in, out)
}

// pathParam is a command's target read from the path parameter name
// (pathName's rules).
func pathParam(name string) func(echo.Context) (string, error) {
	return func(c echo.Context) (string, error) { return pathName(c, name) }
}

// noResult adapts a command that returns only an error.
func noResult[In any](f func(ctx context.Context, a slots.Actor, target string, in In) error) func(context.Context, slots.Actor, string, In) (struct{}, error) {
	return func(ctx context.Context, a slots.Actor, target string, in In) (struct{}, error) {
		return struct{}{}, f(ctx, a, target, in)
	}
}

// answerJSON answers with the command's result as JSON.
func answerJSON[In, Out any](status int) func(echo.Context, string, In, Out) error {
	return func(c echo.Context, _ string, _ In, out Out) error { return c.JSON(status, out) }
}

// answerAccepted answers a command that queued a job: 202 with what was
// accepted.
func answerAccepted[In, Out any]() func(echo.Context, string, In, Out) error {
	return answerJSON[In, Out](http.StatusAccepted)
}

// answerSlot answers a slot command with the slot's view (commandAnswer).
func answerSlot[In, Out any](s *Server, status int) func(echo.Context, string, In, Out) error {
	return func(c echo.Context, name string, _ In, _ Out) error { return s.commandAnswer(c, name, status) }
}
