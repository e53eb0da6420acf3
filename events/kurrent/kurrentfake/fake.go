// Package kurrentfake is a test-only stand-in for a single KurrentDB node: the
// Streams gRPC service (Append and Read, including catch-up subscriptions to
// $all with filters) on a loopback TCP port, built on the protobuf stubs that
// EventStore-Client-Go v4 exports. The real client connects to it unchanged.
//
// It keeps KurrentDB's semantics where Slotkeeper depends on them: expected
// revisions (any, no stream, stream exists, exact), idempotent re-appends of the
// same event ids, non-contiguous log positions (a multi-event append's events
// share one commit position and differ in their prepare positions; $all is
// ordered by the (commit, prepare) pair), exclusive subscription start
// positions, a Confirmation before the first subscription message, and the
// "type", "content-type" and "created" system metadata the client insists on
// (it calls log.Fatalf without "created"). It is NOT a database: data lives in
// memory, there is no auth, no TLS, no gossip and no persistent subscriptions.
//
// Stop and Restart simulate a node going away and coming back on the same port
// with its data kept; that is what the fault tests use.
package kurrentfake

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/EventStore/EventStore-Client-Go/v4/protos/shared"
	api "github.com/EventStore/EventStore-Client-Go/v4/protos/streams"
	"github.com/google/uuid"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// record is one stored event.
type record struct {
	id       uuid.UUID
	stream   string
	rev      uint64
	commit   uint64 // commit position: shared by every event of one multi-event append
	prepare  uint64 // prepare position: the event's own record, unique
	txPos    uint64 // prepare position of its append's first event
	meta     map[string]string
	custom   []byte
	data     []byte
	eventTyp string
}

// Server is a fake KurrentDB node. The zero value is not usable: call Start.
type Server struct {
	mu      sync.Mutex
	log     []record
	streams map[string][]int // stream -> indexes into log
	changed chan struct{}    // closed and replaced on every commit
	nextPos uint64

	addr    string // fixed on first start so Restart comes back on the same port
	grpcSrv *grpc.Server
	running bool
	closed  bool

	appends       atomic.Int64
	reads         atomic.Int64
	subscriptions atomic.Int64
}

// Start listens on a free loopback port and serves until Stop or Close.
func Start() (*Server, error) {
	s := &Server{streams: map[string][]int{}, changed: make(chan struct{}), nextPos: 1000}
	if err := s.listen("127.0.0.1:0"); err != nil {
		return nil, err
	}
	return s, nil
}

// StartOn is Start on a given loopback address, e.g. for a fake run as its own
// process on a port chosen by a test.
func StartOn(addr string) (*Server, error) {
	s := &Server{streams: map[string][]int{}, changed: make(chan struct{}), nextPos: 1000}
	if err := s.listen(addr); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *Server) listen(addr string) error {
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("kurrentfake: listen %s: %w", addr, err)
	}
	g := grpc.NewServer()
	api.RegisterStreamsServer(g, &streamsService{s: s})
	// ServerFeatures and Gossip are deliberately not registered: the client
	// treats Unimplemented from ServerFeatures as "old server, no features",
	// and single-node connection strings never ask for gossip.
	s.mu.Lock()
	s.addr = lis.Addr().String()
	s.grpcSrv = g
	s.running = true
	s.mu.Unlock()
	go func() { _ = g.Serve(lis) }()
	return nil
}

// Addr is host:port of the node.
func (s *Server) Addr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.addr
}

// ConnString is the single-node, insecure connection string for the node.
func (s *Server) ConnString() string { return "esdb://" + s.Addr() + "?tls=false" }

// Stop kills the node abruptly: the listener closes and every open call
// (appends, reads, subscriptions) ends with Unavailable, as when a process
// dies. The data is kept for Restart.
func (s *Server) Stop() {
	s.mu.Lock()
	g := s.grpcSrv
	s.grpcSrv, s.running = nil, false
	s.mu.Unlock()
	if g != nil {
		g.Stop()
	}
}

// Restart brings a stopped node back on the same address with the same data.
// Go listeners set SO_REUSEADDR, so the port can be bound again at once even
// while old connections sit in TIME_WAIT.
func (s *Server) Restart() error {
	s.mu.Lock()
	addr, running, closed := s.addr, s.running, s.closed
	s.mu.Unlock()
	if closed {
		return errors.New("kurrentfake: closed")
	}
	if running {
		return nil
	}
	return s.listen(addr)
}

// Close stops the node for good.
func (s *Server) Close() {
	s.Stop()
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
}

// Appends, Reads and Subscriptions count the calls the node has received, so
// tests can assert on what the client really did (e.g. that it resubscribed).
func (s *Server) Appends() int64       { return s.appends.Load() }
func (s *Server) Reads() int64         { return s.reads.Load() }
func (s *Server) Subscriptions() int64 { return s.subscriptions.Load() }

// Len is the number of events in $all, system events included.
func (s *Server) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.log)
}

// AppendSystemEvent writes an event to a '$' stream the way KurrentDB writes
// its own statistics and settings events into $all; the adapter must skip them.
func (s *Server) AppendSystemEvent(stream, typ string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.commitLocked(stream, []*api.AppendReq_ProposedMessage{{
		Id:       &shared.UUID{Value: &shared.UUID_String_{String_: uuid.NewString()}},
		Metadata: map[string]string{"type": typ, "content-type": "application/json"},
		Data:     []byte(`{}`),
	}})
}

// ---- the gRPC service ----

type streamsService struct {
	api.UnimplementedStreamsServer
	s *Server
}

// Append implements KurrentDB's append: one Options message, then proposed
// messages until the client closes its side.
func (svc *streamsService) Append(stream api.Streams_AppendServer) error {
	s := svc.s
	s.appends.Add(1)
	first, err := stream.Recv()
	if err != nil {
		return err
	}
	opts := first.GetOptions()
	if opts == nil {
		return status.Error(codes.InvalidArgument, "first append message must be Options")
	}
	name := string(opts.GetStreamIdentifier().GetStreamName())
	if name == "" {
		return status.Error(codes.InvalidArgument, "empty stream name")
	}
	var msgs []*api.AppendReq_ProposedMessage
	for {
		req, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		m := req.GetProposedMessage()
		if m == nil {
			return status.Error(codes.InvalidArgument, "expected a proposed message")
		}
		if m.Metadata["type"] == "" || m.Metadata["content-type"] == "" {
			return status.Error(codes.InvalidArgument, "proposed message needs type and content-type metadata")
		}
		msgs = append(msgs, m)
	}

	s.mu.Lock()
	resp := s.appendLocked(name, opts, msgs)
	s.mu.Unlock()
	return stream.SendAndClose(resp)
}

func (s *Server) appendLocked(name string, opts *api.AppendReq_Options, msgs []*api.AppendReq_ProposedMessage) *api.AppendResp {
	idx := s.streams[name]
	exists := len(idx) > 0
	var last uint64
	if exists {
		last = uint64(len(idx) - 1)
	}

	ok, replayFrom := false, -1 // replayFrom: first revision of an idempotent replay
	switch e := opts.GetExpectedStreamRevision().(type) {
	case *api.AppendReq_Options_Any:
		ok = true
		// KurrentDB answers a re-sent append (same ids at the stream's end)
		// with success instead of writing the events twice.
		if n := len(msgs); n > 0 && len(idx) >= n && s.sameIDs(idx[len(idx)-n:], msgs) {
			replayFrom = len(idx) - n
		}
	case *api.AppendReq_Options_NoStream:
		ok = !exists
		if !ok && len(idx) >= len(msgs) && len(msgs) > 0 && s.sameIDs(idx[:len(msgs)], msgs) {
			replayFrom = 0
		}
	case *api.AppendReq_Options_StreamExists:
		ok = exists
	case *api.AppendReq_Options_Revision:
		ok = exists && last == e.Revision
		if !ok && exists && e.Revision < last && len(msgs) > 0 {
			from := int(e.Revision) + 1
			if from+len(msgs) <= len(idx) && s.sameIDs(idx[from:from+len(msgs)], msgs) {
				replayFrom = from
			}
		}
	default:
		// The client always sends one of the four; no option is a client bug.
		return wrongVersion(opts, exists, last)
	}

	if replayFrom >= 0 {
		lastRec := s.log[idx[replayFrom+len(msgs)-1]]
		return success(lastRec)
	}
	if !ok {
		return wrongVersion(opts, exists, last)
	}
	if len(msgs) == 0 {
		if !exists {
			return &api.AppendResp{Result: &api.AppendResp_Success_{Success: &api.AppendResp_Success{
				CurrentRevisionOption: &api.AppendResp_Success_NoStream{NoStream: &shared.Empty{}},
				PositionOption:        &api.AppendResp_Success_NoPosition{NoPosition: &shared.Empty{}},
			}}}
		}
		lastRec := s.log[idx[len(idx)-1]]
		return success(lastRec)
	}
	return success(s.commitLocked(name, msgs))
}

// commitLocked writes msgs to stream and wakes the subscriptions. It returns
// the last record written.
//
// Positions are byte offsets of log records, as in KurrentDB. A single event
// is one record: its commit and prepare positions are equal. The events of a
// multi-event append are a transaction: one prepare record per event, then a
// commit record, and every event of it reports the commit record's position
// as its commit position (TFPos(commit, prepare) in KurrentDB's $all reads of
// transactions with a commit record). So commit positions repeat; only the
// prepare position tells the events apart.
func (s *Server) commitLocked(name string, msgs []*api.AppendReq_ProposedMessage) record {
	idx := s.streams[name]
	var rec record
	first := len(s.log)
	txPos := s.nextPos
	for _, m := range msgs {
		meta := make(map[string]string, len(m.Metadata)+1)
		for k, v := range m.Metadata {
			meta[k] = v
		}
		// .NET ticks (100 ns) since the Unix epoch, as KurrentDB writes them.
		meta["created"] = fmt.Sprint(time.Now().UnixNano() / 100)
		rec = record{
			id: protoUUID(m.GetId()), stream: name, rev: uint64(len(idx)),
			commit: s.nextPos, prepare: s.nextPos, txPos: txPos,
			meta: meta, custom: append([]byte(nil), m.CustomMetadata...),
			data: append([]byte(nil), m.Data...), eventTyp: m.Metadata["type"],
		}
		// Positions are byte offsets in KurrentDB: they grow but skip values.
		s.nextPos += uint64(128 + len(m.Data) + len(m.CustomMetadata))
		s.log = append(s.log, rec)
		idx = append(idx, len(s.log)-1)
	}
	if len(msgs) > 1 {
		commit := s.nextPos // the commit record follows the prepares
		s.nextPos += 64
		for i := first; i < len(s.log); i++ {
			s.log[i].commit = commit
		}
		rec = s.log[len(s.log)-1]
	}
	s.streams[name] = idx
	close(s.changed)
	s.changed = make(chan struct{})
	return rec
}

func (s *Server) sameIDs(idx []int, msgs []*api.AppendReq_ProposedMessage) bool {
	for i, m := range msgs {
		if s.log[idx[i]].id != protoUUID(m.GetId()) {
			return false
		}
	}
	return true
}

// success answers an append whose last event is last. Like KurrentDB's
// WriteEventsCompleted, the position is the transaction's: its commit
// position and the prepare position of its first event.
func success(last record) *api.AppendResp {
	return &api.AppendResp{Result: &api.AppendResp_Success_{Success: &api.AppendResp_Success{
		CurrentRevisionOption: &api.AppendResp_Success_CurrentRevision{CurrentRevision: last.rev},
		PositionOption: &api.AppendResp_Success_Position{Position: &api.AppendResp_Position{
			CommitPosition: last.commit, PreparePosition: last.txPos,
		}},
	}}}
}

func wrongVersion(opts *api.AppendReq_Options, exists bool, last uint64) *api.AppendResp {
	w := &api.AppendResp_WrongExpectedVersion{}
	if exists {
		w.CurrentRevisionOption = &api.AppendResp_WrongExpectedVersion_CurrentRevision{CurrentRevision: last}
		w.CurrentRevisionOption_20_6_0 = &api.AppendResp_WrongExpectedVersion_CurrentRevision_20_6_0{CurrentRevision_20_6_0: last}
	} else {
		w.CurrentRevisionOption = &api.AppendResp_WrongExpectedVersion_CurrentNoStream{CurrentNoStream: &shared.Empty{}}
		w.CurrentRevisionOption_20_6_0 = &api.AppendResp_WrongExpectedVersion_NoStream_20_6_0{NoStream_20_6_0: &shared.Empty{}}
	}
	switch e := opts.GetExpectedStreamRevision().(type) {
	case *api.AppendReq_Options_Revision:
		w.ExpectedRevisionOption = &api.AppendResp_WrongExpectedVersion_ExpectedRevision{ExpectedRevision: e.Revision}
	case *api.AppendReq_Options_NoStream:
		w.ExpectedRevisionOption = &api.AppendResp_WrongExpectedVersion_ExpectedNoStream{ExpectedNoStream: &shared.Empty{}}
	case *api.AppendReq_Options_StreamExists:
		w.ExpectedRevisionOption = &api.AppendResp_WrongExpectedVersion_ExpectedStreamExists{ExpectedStreamExists: &shared.Empty{}}
	default:
		w.ExpectedRevisionOption = &api.AppendResp_WrongExpectedVersion_ExpectedAny{ExpectedAny: &shared.Empty{}}
	}
	return &api.AppendResp{Result: &api.AppendResp_WrongExpectedVersion_{WrongExpectedVersion: w}}
}

// Read serves stream reads, $all reads and $all subscriptions.
func (svc *streamsService) Read(req *api.ReadReq, out api.Streams_ReadServer) error {
	s := svc.s
	o := req.GetOptions()
	if o == nil {
		return status.Error(codes.InvalidArgument, "read without options")
	}
	if o.GetSubscription() != nil {
		if o.GetAll() == nil {
			return status.Error(codes.Unimplemented, "kurrentfake: only $all subscriptions are implemented")
		}
		s.subscriptions.Add(1)
		return s.subscribeAll(o, out)
	}
	s.reads.Add(1)
	backward := o.GetReadDirection() == api.ReadReq_Options_Backwards
	count := o.GetCount()
	if so := o.GetStream(); so != nil {
		return s.readStream(so, backward, count, out)
	}
	if ao := o.GetAll(); ao != nil {
		return s.readAll(ao, backward, count, out)
	}
	return status.Error(codes.InvalidArgument, "read needs a stream or $all")
}

func (s *Server) readStream(so *api.ReadReq_Options_StreamOptions, backward bool, count uint64, out api.Streams_ReadServer) error {
	name := so.GetStreamIdentifier().GetStreamName()
	s.mu.Lock()
	idx := s.streams[string(name)]
	if len(idx) == 0 {
		s.mu.Unlock()
		return out.Send(&api.ReadResp{Content: &api.ReadResp_StreamNotFound_{StreamNotFound: &api.ReadResp_StreamNotFound{
			StreamIdentifier: &shared.StreamIdentifier{StreamName: name},
		}}})
	}
	var batch []record
	n := int64(len(idx))
	var from int64
	switch r := so.GetRevisionOption().(type) {
	case *api.ReadReq_Options_StreamOptions_Revision:
		from = int64(min(r.Revision, uint64(n))) // clamp: a huge revision means "past the end"
	case *api.ReadReq_Options_StreamOptions_End:
		from = n
	default:
		from = 0
	}
	if backward {
		for i := min(from, n-1); i >= 0 && uint64(len(batch)) < count; i-- {
			batch = append(batch, s.log[idx[i]])
		}
	} else {
		for i := from; i < n && uint64(len(batch)) < count; i++ {
			batch = append(batch, s.log[idx[i]])
		}
	}
	s.mu.Unlock()
	for _, r := range batch {
		if err := out.Send(eventResp(r)); err != nil {
			return err
		}
	}
	return nil
}

func (s *Server) readAll(ao *api.ReadReq_Options_AllOptions, backward bool, count uint64, out api.Streams_ReadServer) error {
	s.mu.Lock()
	n := len(s.log)
	var batch []record
	if backward {
		i := n - 1
		if p := ao.GetPosition(); p != nil {
			// Backwards from a position yields the events before it.
			i = s.firstAtOrAfter(p.GetCommitPosition(), p.GetPreparePosition()) - 1
		} else if ao.GetStart() != nil {
			i = -1
		}
		for ; i >= 0 && uint64(len(batch)) < count; i-- {
			batch = append(batch, s.log[i])
		}
	} else {
		i := 0
		if p := ao.GetPosition(); p != nil {
			i = s.firstAtOrAfter(p.GetCommitPosition(), p.GetPreparePosition())
		} else if ao.GetEnd() != nil {
			i = n
		}
		for ; i < n && uint64(len(batch)) < count; i++ {
			batch = append(batch, s.log[i])
		}
	}
	s.mu.Unlock()
	for _, r := range batch {
		if err := out.Send(eventResp(r)); err != nil {
			return err
		}
	}
	return nil
}

// firstAtOrAfter is the index of the first record whose (commit, prepare)
// position is >= (commit, prepare), the order of $all.
func (s *Server) firstAtOrAfter(commit, prepare uint64) int {
	lo, hi := 0, len(s.log)
	for lo < hi {
		m := (lo + hi) / 2
		if r := s.log[m]; r.commit < commit || (r.commit == commit && r.prepare < prepare) {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

// matcher is a compiled server-side subscription filter.
type matcher struct {
	onType   bool
	prefixes []string
	re       *regexp.Regexp
}

func (m *matcher) match(r record) bool {
	if m == nil {
		return true
	}
	subject := r.stream
	if m.onType {
		subject = r.eventTyp
	}
	if m.re != nil {
		return m.re.MatchString(subject)
	}
	for _, p := range m.prefixes {
		if strings.HasPrefix(subject, p) {
			return true
		}
	}
	return false
}

func compileFilter(o *api.ReadReq_Options) (*matcher, error) {
	f := o.GetFilter()
	if f == nil {
		return nil, nil
	}
	m := &matcher{}
	expr := f.GetStreamIdentifier()
	if et := f.GetEventType(); et != nil {
		m.onType, expr = true, et
	}
	if expr == nil {
		return nil, status.Error(codes.InvalidArgument, "filter without expression")
	}
	m.prefixes = expr.GetPrefix()
	if r := expr.GetRegex(); r != "" {
		re, err := regexp.Compile(r)
		if err != nil {
			return nil, status.Errorf(codes.InvalidArgument, "bad filter regex: %v", err)
		}
		m.re = re
	}
	return m, nil
}

// subscribeAll is a catch-up subscription: Confirmation, then every matching
// event after the start position (exclusive), CaughtUp once, then live events
// as they are committed, until the client goes away or the node stops.
func (s *Server) subscribeAll(o *api.ReadReq_Options, out api.Streams_ReadServer) error {
	m, err := compileFilter(o)
	if err != nil {
		return err
	}
	if err := out.Send(&api.ReadResp{Content: &api.ReadResp_Confirmation{Confirmation: &api.ReadResp_SubscriptionConfirmation{
		SubscriptionId: uuid.NewString(),
	}}}); err != nil {
		return err
	}
	ao := o.GetAll()
	s.mu.Lock()
	next := 0 // index of the next record to consider
	switch {
	case ao.GetEnd() != nil:
		next = len(s.log)
	case ao.GetPosition() != nil:
		// The start position is exclusive, as in KurrentDB.
		p := ao.GetPosition()
		next = s.firstAtOrAfter(p.GetCommitPosition(), p.GetPreparePosition())
		if next < len(s.log) && s.log[next].commit == p.GetCommitPosition() && s.log[next].prepare == p.GetPreparePosition() {
			next++
		}
	}
	s.mu.Unlock()

	ctx := out.Context()
	caughtUp := false
	for {
		s.mu.Lock()
		batch := append([]record(nil), s.log[next:]...)
		wait := s.changed
		s.mu.Unlock()
		for _, r := range batch {
			next++
			if !m.match(r) {
				continue
			}
			if err := out.Send(eventResp(r)); err != nil {
				return err
			}
		}
		if len(batch) > 0 && m != nil {
			// Filtered subscriptions report how far the server has scanned.
			last := batch[len(batch)-1]
			if err := out.Send(&api.ReadResp{Content: &api.ReadResp_Checkpoint_{Checkpoint: &api.ReadResp_Checkpoint{
				CommitPosition: last.commit, PreparePosition: last.prepare,
			}}}); err != nil {
				return err
			}
		}
		if !caughtUp {
			caughtUp = true
			if err := out.Send(&api.ReadResp{Content: &api.ReadResp_CaughtUp_{CaughtUp: &api.ReadResp_CaughtUp{}}}); err != nil {
				return err
			}
		}
		select {
		case <-ctx.Done():
			return status.FromContextError(ctx.Err()).Err()
		case <-wait:
		}
	}
}

func eventResp(r record) *api.ReadResp {
	most, least := uuidInts(r.id)
	return &api.ReadResp{Content: &api.ReadResp_Event{Event: &api.ReadResp_ReadEvent{
		Event: &api.ReadResp_ReadEvent_RecordedEvent{
			Id:               &shared.UUID{Value: &shared.UUID_Structured_{Structured: &shared.UUID_Structured{MostSignificantBits: most, LeastSignificantBits: least}}},
			StreamIdentifier: &shared.StreamIdentifier{StreamName: []byte(r.stream)},
			StreamRevision:   r.rev,
			PreparePosition:  r.prepare,
			CommitPosition:   r.commit,
			Metadata:         r.meta,
			CustomMetadata:   r.custom,
			Data:             r.data,
		},
		Position: &api.ReadResp_ReadEvent_CommitPosition{CommitPosition: r.commit},
	}}}
}

func protoUUID(u *shared.UUID) uuid.UUID {
	if st := u.GetStructured(); st != nil {
		var b uuid.UUID
		binary.BigEndian.PutUint64(b[:8], uint64(st.MostSignificantBits))
		binary.BigEndian.PutUint64(b[8:], uint64(st.LeastSignificantBits))
		return b
	}
	id, err := uuid.Parse(u.GetString_())
	if err != nil {
		return uuid.New()
	}
	return id
}

func uuidInts(id uuid.UUID) (int64, int64) {
	return int64(binary.BigEndian.Uint64(id[:8])), int64(binary.BigEndian.Uint64(id[8:]))
}

// Wait blocks until the node holds at least n events in $all or ctx ends.
// Tests use it to wait for an append they did not make themselves.
func (s *Server) Wait(ctx context.Context, n int) error {
	for {
		s.mu.Lock()
		have, wait := len(s.log), s.changed
		s.mu.Unlock()
		if have >= n {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-wait:
		}
	}
}
