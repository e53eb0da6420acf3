package kurrent

import (
	"context"
	"errors"
	"strings"

	"github.com/EventStore/EventStore-Client-Go/v4/esdb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/slotkeeper/slotkeeper/events"
)

// permanent returns the events.PermanentError for an answer no retry can
// change, or nil. The client hands subscription errors over as raw gRPC
// errors (G: subscriptions.go:64-75) and other calls' as *esdb.Error with
// the gRPC error inside (G: impl.go:36-82, 565-589), so both are looked at.
func permanent(err error) *events.PermanentError {
	if err == nil {
		return nil
	}
	code := status.Code(err)
	var e *esdb.Error
	if errors.As(err, &e) {
		switch e.Code() {
		case esdb.ErrorCodeAccessDenied:
			code = codes.PermissionDenied
		case esdb.ErrorCodeUnauthenticated:
			code = codes.Unauthenticated
		}
	}
	switch code {
	case codes.PermissionDenied:
		return &events.PermanentError{Reason: reasonDenied, Err: err}
	case codes.Unauthenticated:
		return &events.PermanentError{Reason: reasonUnauthenticated, Err: err}
	case codes.InvalidArgument:
		if strings.Contains(err.Error(), "invalid position") {
			return &events.PermanentError{Reason: "KurrentDB: not an event's position", Err: errors.Join(events.ErrInvalidPosition, err)}
		}
		return &events.PermanentError{Reason: "KurrentDB refused the request as invalid", Err: err}
	}
	return nil
}

// The refusals of the process itself (as opposed to one request's, such as
// an invalid start position): they are kept for Refused.
const (
	reasonDenied          = "KurrentDB denied access: the user needs read on $all and read and write on Slotkeeper's streams (docs/kurrent.md, Users and ACLs)"
	reasonUnauthenticated = "KurrentDB did not accept the credentials of the connection string"
)

// notePermanent logs a refusal of the process once per store (every
// consumer of the process gets the same one) and keeps the first for
// Refused. A refused request (an invalid position, an invalid argument) is
// the caller's to report: it does not make the process unready.
func (s *Store) notePermanent(pe *events.PermanentError) {
	if pe.Reason != reasonDenied && pe.Reason != reasonUnauthenticated {
		s.log.Debug("KurrentDB refused a request", "err", pe)
		return
	}
	s.mu.Lock()
	first := s.refused == nil
	if first {
		s.refused = pe
	}
	s.mu.Unlock()
	if first {
		s.log.Error("KurrentDB refuses this process; consumers stop", "err", pe)
	} else {
		s.log.Debug("KurrentDB refusal (logged before)", "err", pe)
	}
}

// Refused returns the first refusal of this process by KurrentDB (access
// denied, bad credentials: an *events.PermanentError wrapping
// events.ErrPermanent), or nil. Readiness reports it: a refused process is
// up but does no work. It stays until the process restarts, since the
// consumers it stopped do not come back by themselves.
func (s *Store) Refused() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.refused == nil {
		return nil
	}
	return s.refused
}

// appendStage tells how far the client got with an append before its error,
// from the library's own wrapping (G: client.go:66, 73, 85): before the
// request went out nothing can have been written; a send error means the
// call ended before the client closed its side, so the server, which
// commits only after the whole request (K: Streams.Append.cs:56-99), wrote
// nothing; only an error from the answer (G: client.go:89) leaves the
// outcome unknown.
type appendStage int

const (
	stageAnswered appendStage = iota // an answer from the server (or none: success)
	stageNotSent                     // failed before or while sending
	stageSendEOF                     // a send saw io.EOF: the server ended the call early
	stageNoAnswer                    // sent in full, the answer was lost
)

func stageOf(err error) appendStage {
	msg := err.Error()
	switch {
	case strings.HasPrefix(msg, "could not send append request") && strings.Contains(msg, "EOF"):
		return stageSendEOF
	case strings.HasPrefix(msg, "could not construct append operation"), strings.HasPrefix(msg, "could not send append request"):
		return stageNotSent
	}
	var e *esdb.Error
	if errors.As(err, &e) && e.Code() == esdb.ErrorCodeWrongExpectedVersion {
		return stageAnswered
	}
	if permanent(err) != nil {
		return stageAnswered
	}
	switch status.Code(err) {
	case codes.DeadlineExceeded, codes.Canceled, codes.Unavailable, codes.Aborted, codes.Unknown, codes.Internal:
		// Aborted is KurrentDB's prepare/commit/forward timeout, after which
		// the write may still commit (K: Streams.Append.cs:137-141,
		// RpcExceptions.cs:14); DeadlineExceeded the client's own deadline.
		return stageNoAnswer
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return stageNoAnswer
	}
	return stageAnswered
}
