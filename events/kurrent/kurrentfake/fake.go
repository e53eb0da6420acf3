// Package kurrentfake is a test-only stand-in for a single KurrentDB node: the
// Streams gRPC service (Append and Read, including catch-up subscriptions to
// $all with filters) on a loopback TCP port, built on the protobuf stubs that
// EventStore-Client-Go v4 exports. The real client connects to it unchanged.
//
// It is a claim about the real server, and every behaviour below cites the
// KurrentDB source it copies ("K:" = src/KurrentDB.Core/ at tag v26.1.0
// unless another tag is named; "G:" = esdb/ of EventStore-Client-Go v4.2.0):
//
//   - expected revisions (any, no stream, stream exists, exact) and the
//     idempotency of re-sent event ids: at any depth for Exact and NoStream,
//     only through a cache of recent ids (lost on Restart) for Any and
//     StreamExists;
//   - self-committed appends: every event's $all position is (p, p), its own
//     log offset, also within one multi-event append; positions skip values;
//     the append's answer carries the position of its last event;
//   - positions are validated: a read or subscription from a position that
//     is not a record's answers InvalidArgument "Trying to read from an
//     invalid position."; a subscription from beyond the end goes live and
//     silently skips everything up to its start;
//   - the size limits of the version it claims (SetVersion), checked while
//     the append streams in and answered mid-stream;
//   - permanent refusals (Deny): PermissionDenied for $all reads, or
//     Unauthenticated for every call;
//   - a follower mode (Lag/CatchUp): reads and subscriptions are served from
//     a copy that lags, writes go to the leader;
//   - injected append timeouts (FailAppend) after which the write did or did
//     not commit;
//   - a Confirmation before the first subscription message, and the "type",
//     "content-type" and "created" system metadata the client insists on (it
//     calls log.Fatalf without "created").
//
// It is NOT a database: data lives in memory, there is no TLS, no gossip and
// no persistent subscriptions. Stop and Restart simulate a node going away
// and coming back on the same port with its data kept; that is what the
// fault tests use.
package kurrentfake

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
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
	commit   uint64 // commit position: equal to prepare (self-committed, see commitLocked)
	prepare  uint64 // prepare position: the event's own record, unique
	meta     map[string]string
	custom   []byte
	data     []byte
	eventTyp string
}

// Version is what the node claims to be, as far as it shows in behaviour:
// its append size limits.
type Version struct {
	Name string
	// MaxAppendSize bounds the sum of the events' sizes of one append,
	// MaxAppendEventSize one event's; size = data + metadata + 2 × type
	// length (K: Data/Event.cs:46-47).
	MaxAppendSize, MaxAppendEventSize int
}

var (
	// V25_0 caps a whole append at 1 MiB and has no per-event limit
	// (src/EventStore.Core/Configuration/ClusterVNodeOptions.cs:156-159 at
	// v25.0.0).
	V25_0 = Version{Name: "25.0", MaxAppendSize: 1 << 20, MaxAppendEventSize: math.MaxInt32}
	// V26_1 (and v25.1+): 256 MiB per append (TFConsts.ChunkSize), 16 MiB
	// per event (TFConsts.MaxLogRecordSize) (K: Configuration/
	// ClusterVNodeOptions.cs:156-159; TransactionLog/Chunks/TFConsts.cs:9,14).
	V26_1 = Version{Name: "26.1", MaxAppendSize: 256 << 20, MaxAppendEventSize: 16 << 20}
)

// Timeout says how an injected append timeout ends (FailAppend).
type Timeout int

const (
	// ServerTimeout answers Aborted "Operation timed out: …", as KurrentDB
	// does for its prepare, commit and forward timeouts
	// (K: Services/Transport/Grpc/Streams.Append.cs:137-141,
	// RpcExceptions.cs:14).
	ServerTimeout Timeout = iota
	// Hang never answers: the client's own deadline (10 s by default,
	// G: options.go:37) or its context ends the call (DeadlineExceeded).
	Hang
)

type appendFault struct {
	commit bool
	how    Timeout
}

// Server is a fake KurrentDB node. The zero value is not usable: call Start.
type Server struct {
	mu      sync.Mutex
	log     []record
	streams map[string][]int // stream -> indexes into log
	changed chan struct{}    // closed and replaced on every commit
	nextPos uint64
	version Version
	// recent is the in-memory cache of recently committed event ids (log
	// indexes) that Any and StreamExists appends are deduplicated through
	// (K: Services/Storage/ReaderIndex/IndexWriter.cs:75,91,200-221). A
	// real node bounds it and loses it on restart or failover; Restart
	// clears it.
	recent   map[uuid.UUID]int
	follower int // -1: reads see the leader's log; else only log[:follower]
	deny     codes.Code
	faults   []appendFault

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
	s := newServer()
	if err := s.listen("127.0.0.1:0"); err != nil {
		return nil, err
	}
	return s, nil
}

// StartOn is Start on a given loopback address, e.g. for a fake run as its own
// process on a port chosen by a test.
func StartOn(addr string) (*Server, error) {
	s := newServer()
	if err := s.listen(addr); err != nil {
		return nil, err
	}
	return s, nil
}

func newServer() *Server {
	return &Server{streams: map[string][]int{}, changed: make(chan struct{}), nextPos: 1000,
		version: V26_1, recent: map[uuid.UUID]int{}, follower: -1}
}

// SetVersion makes the node enforce v's size limits (default V26_1).
func (s *Server) SetVersion(v Version) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.version = v
}

// Deny makes the node refuse as a real one does a user it will not serve:
// codes.PermissionDenied refuses reads and subscriptions of $all (a user
// without $all read: K: Services/Transport/Grpc/RpcExceptions.cs:60-62,
// "Access Denied"); codes.Unauthenticated refuses every call (bad
// credentials). The Go client hands either to the caller as it is
// (G: subscriptions.go:64-75, impl.go:565-589). codes.OK lifts it.
func (s *Server) Deny(code codes.Code) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.deny = code
}

func (s *Server) denied(allRead bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.deny == codes.Unauthenticated:
		return status.Error(codes.Unauthenticated, "Bad credentials")
	case s.deny == codes.PermissionDenied && allRead:
		return status.Error(codes.PermissionDenied, "Access Denied")
	}
	return nil
}

// Lag turns the node into a follower that stops applying what the leader
// writes: reads and subscriptions are served from its copy as it is now,
// while appends are forwarded to the leader and answered from there. The Go
// client never sends requires-leader (it sets the header on the incoming
// metadata, G: options.go:53-56), so a follower serves reads locally
// (K: Services/VNode/ClusterVNodeController.cs:853-861). CatchUp ends it.
func (s *Server) Lag() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.follower < 0 {
		s.follower = len(s.log)
	}
}

// CatchUp lets the follower copy reach the leader (see Lag).
func (s *Server) CatchUp() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.follower = -1
	s.wakeLocked()
}

// FailAppend makes the next append not answer normally: it is committed
// (commit) or dropped, then ends as how says. Calls queue, one per append.
func (s *Server) FailAppend(commit bool, how Timeout) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = append(s.faults, appendFault{commit: commit, how: how})
}

// visibleLocked is how much of the log reads see: all of it on the leader,
// the lagging copy on a follower.
func (s *Server) visibleLocked() int {
	if s.follower >= 0 {
		return min(s.follower, len(s.log))
	}
	return len(s.log)
}

func (s *Server) wakeLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
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
	s.mu.Lock()
	clear(s.recent) // the id cache is memory only (see Server.recent)
	s.mu.Unlock()
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
// messages until the client closes its side
// (K: Services/Transport/Grpc/Streams.Append.cs:21-84).
func (svc *streamsService) Append(stream api.Streams_AppendServer) error {
	s := svc.s
	s.appends.Add(1)
	if err := s.denied(false); err != nil {
		return err
	}
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
	s.mu.Lock()
	limits := s.version
	s.mu.Unlock()
	var msgs []*api.AppendReq_ProposedMessage
	size := 0
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
		// Sizes are checked as the events stream in, and the call ends at
		// the first one over the limit, before the client has sent the rest
		// (K: Streams.Append.cs:64-73; messages RpcExceptions.cs:120-132).
		n := len(m.Data) + len(m.CustomMetadata) + 2*len(m.Metadata["type"])
		if n > limits.MaxAppendEventSize {
			return status.Errorf(codes.InvalidArgument, "Event with Id: %s, Size: %d, exceeds Maximum Append Event Size of %d.",
				protoUUID(m.GetId()), n, limits.MaxAppendEventSize)
		}
		if size += n; size > limits.MaxAppendSize {
			return status.Errorf(codes.InvalidArgument, "Maximum Append Size of %d Exceeded.", limits.MaxAppendSize)
		}
		msgs = append(msgs, m)
	}

	s.mu.Lock()
	var fault *appendFault
	if len(s.faults) > 0 {
		fault = &s.faults[0]
		s.faults = s.faults[1:]
	}
	var resp *api.AppendResp
	if fault == nil || fault.commit {
		resp = s.appendLocked(name, opts, msgs)
	}
	s.mu.Unlock()
	if fault != nil {
		if fault.how == Hang {
			<-stream.Context().Done()
			return status.FromContextError(stream.Context().Err()).Err()
		}
		return status.Error(codes.Aborted, "Operation timed out: Commit timeout.")
	}
	return stream.SendAndClose(resp)
}

func (s *Server) appendLocked(name string, opts *api.AppendReq_Options, msgs []*api.AppendReq_ProposedMessage) *api.AppendResp {
	idx := s.streams[name]
	exists := len(idx) > 0
	var last uint64
	if exists {
		last = uint64(len(idx) - 1)
	}

	// Idempotency (K: Services/Storage/ReaderIndex/IndexWriter.cs:75-320):
	// a re-sent append is answered with success and written once. Exact
	// and NoStream find their earlier copy at any depth, from the revision
	// they expected; Any and StreamExists only through the cache of recent
	// ids. A partial match is a consistency failure (wrong version).
	ok, replayFrom, corrupt := false, -1, false
	switch e := opts.GetExpectedStreamRevision().(type) {
	case *api.AppendReq_Options_Any:
		ok = true
		replayFrom, corrupt = s.cachedLocked(name, msgs)
	case *api.AppendReq_Options_StreamExists:
		ok = exists
		replayFrom, corrupt = s.cachedLocked(name, msgs)
	case *api.AppendReq_Options_NoStream:
		ok = !exists
		if !ok && len(msgs) > 0 {
			replayFrom, corrupt = s.matchAtLocked(idx, 0, msgs)
		}
	case *api.AppendReq_Options_Revision:
		ok = exists && last == e.Revision
		if !ok && exists && e.Revision < last && len(msgs) > 0 {
			replayFrom, corrupt = s.matchAtLocked(idx, int(e.Revision)+1, msgs)
		}
	default:
		// The client always sends one of the four; no option is a client bug.
		return wrongVersion(opts, exists, last)
	}

	switch {
	case replayFrom >= 0:
		return success(s.log[idx[replayFrom+len(msgs)-1]])
	case corrupt, !ok:
		return wrongVersion(opts, exists, last)
	}
	if len(msgs) == 0 {
		if !exists {
			return &api.AppendResp{Result: &api.AppendResp_Success_{Success: &api.AppendResp_Success{
				CurrentRevisionOption: &api.AppendResp_Success_NoStream{NoStream: &shared.Empty{}},
				PositionOption:        &api.AppendResp_Success_NoPosition{NoPosition: &shared.Empty{}},
			}}}
		}
		return success(s.log[idx[len(idx)-1]])
	}
	return success(s.commitLocked(name, msgs))
}

// matchAtLocked checks msgs against the stream's events from revision from:
// all ids equal gives from (a replay), a partial match corrupt.
func (s *Server) matchAtLocked(idx []int, from int, msgs []*api.AppendReq_ProposedMessage) (int, bool) {
	same := 0
	for i, m := range msgs {
		if from+i >= len(idx) || s.log[idx[from+i]].id != protoUUID(m.GetId()) {
			break
		}
		same++
	}
	switch {
	case same == len(msgs):
		return from, false
	case same > 0:
		return -1, true
	}
	return -1, false
}

// cachedLocked looks the first id up in the recent-ids cache (Any and
// StreamExists appends).
func (s *Server) cachedLocked(name string, msgs []*api.AppendReq_ProposedMessage) (int, bool) {
	if len(msgs) == 0 {
		return -1, false
	}
	i, ok := s.recent[protoUUID(msgs[0].GetId())]
	if !ok || s.log[i].stream != name {
		return -1, false
	}
	return s.matchAtLocked(s.streams[name], int(s.log[i].rev), msgs)
}

// commitLocked writes msgs to stream and wakes the subscriptions. It returns
// the last record written.
//
// Positions are byte offsets of log records, as in KurrentDB, and they grow
// but skip values. A gRPC append is self-committed: each event is one
// prepare record flagged IsCommitted, with no commit record, so every
// event's $all position is (p, p), its own offset, also within a
// multi-event append (K: Services/Storage/StorageWriterService.cs:374-399;
// Services/Storage/ReaderIndex/AllReader.cs:115,122).
func (s *Server) commitLocked(name string, msgs []*api.AppendReq_ProposedMessage) record {
	idx := s.streams[name]
	var rec record
	for _, m := range msgs {
		meta := make(map[string]string, len(m.Metadata)+1)
		for k, v := range m.Metadata {
			meta[k] = v
		}
		// .NET ticks (100 ns) since the Unix epoch, as KurrentDB writes them.
		meta["created"] = fmt.Sprint(time.Now().UnixNano() / 100)
		rec = record{
			id: protoUUID(m.GetId()), stream: name, rev: uint64(len(idx)),
			commit: s.nextPos, prepare: s.nextPos,
			meta: meta, custom: append([]byte(nil), m.CustomMetadata...),
			data: append([]byte(nil), m.Data...), eventTyp: m.Metadata["type"],
		}
		s.nextPos += uint64(128 + len(m.Data) + len(m.CustomMetadata))
		s.log = append(s.log, rec)
		idx = append(idx, len(s.log)-1)
		s.recent[rec.id] = len(s.log) - 1
	}
	s.streams[name] = idx
	s.wakeLocked()
	return rec
}

// success answers an append whose last event is last: the position is the
// last event's, as both commit and prepare position
// (K: Services/RequestManager/Managers/WriteEvents.cs:85-91).
func success(last record) *api.AppendResp {
	return &api.AppendResp{Result: &api.AppendResp_Success_{Success: &api.AppendResp_Success{
		CurrentRevisionOption: &api.AppendResp_Success_CurrentRevision{CurrentRevision: last.rev},
		PositionOption: &api.AppendResp_Success_Position{Position: &api.AppendResp_Position{
			CommitPosition: last.prepare, PreparePosition: last.prepare,
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
	if err := s.denied(o.GetAll() != nil); err != nil {
		return err
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
	// A follower's copy holds only the events it has applied.
	vis := s.visibleLocked()
	idx := s.streams[string(name)]
	for len(idx) > 0 && idx[len(idx)-1] >= vis {
		idx = idx[:len(idx)-1]
	}
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

// errInvalidPosition is KurrentDB's answer to a read or subscription from a
// position that is not the start of a log record: the chunk reader finds no
// record there (K: TransactionLog/Chunks/TFChunk/TFChunkReadSide.cs:517-560)
// and the gRPC layer answers InvalidArgument
// (K: Services/Transport/Grpc/RpcExceptions.cs:259-260). Subscriptions send
// it after their Confirmation, ending the call
// (K: Services/Transport/Enumerators/Enumerator.AllSubscriptionFiltered.cs:158,175-181).
var errInvalidPosition = status.Error(codes.InvalidArgument, "Trying to read from an invalid position.")

// positionLocked finds where a read from (commit, prepare) starts among the
// first vis records: the index of the record there (exact), or vis when the
// position is at or beyond the end (beyond tells which). A position inside
// the log that is not a record's start is invalid. Every record here is an
// event (self-committed appends have no commit records).
func (s *Server) positionLocked(commit, prepare uint64, vis int) (i int, beyond bool, err error) {
	end := s.nextPos // the writer's position: the next record goes there
	if vis < len(s.log) {
		end = s.log[vis].prepare
	}
	switch {
	case commit == end && prepare == end:
		return vis, false, nil
	case commit >= end && prepare >= end:
		return vis, true, nil
	case commit != prepare:
		return 0, false, errInvalidPosition
	}
	i = s.firstAtOrAfter(commit, prepare)
	if i >= vis || s.log[i].prepare != prepare {
		return 0, false, errInvalidPosition
	}
	return i, false, nil
}

func (s *Server) readAll(ao *api.ReadReq_Options_AllOptions, backward bool, count uint64, out api.Streams_ReadServer) error {
	s.mu.Lock()
	n := s.visibleLocked()
	var batch []record
	start := n // forward: first record; backward: one past the first record
	switch {
	case ao.GetPosition() != nil:
		p := ao.GetPosition()
		i, _, err := s.positionLocked(p.GetCommitPosition(), p.GetPreparePosition(), n)
		if err != nil {
			s.mu.Unlock()
			return err
		}
		// Forward from a position includes the event there; backward from
		// it yields the events before it.
		start = i
	case backward && ao.GetStart() != nil:
		start = 0
	case !backward && ao.GetEnd() == nil:
		start = 0
	}
	if backward {
		for i := start - 1; i >= 0 && uint64(len(batch)) < count; i-- {
			batch = append(batch, s.log[i])
		}
	} else {
		for i := start; i < n && uint64(len(batch)) < count; i++ {
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
// event after the start position (exclusive), CaughtUp, then live events
// as they are committed, until the client goes away or the node stops.
func (s *Server) subscribeAll(o *api.ReadReq_Options, out api.Streams_ReadServer) error {
	m, err := compileFilter(o)
	if err != nil {
		return err
	}
	// The confirmation comes before the start is looked at
	// (K: Enumerator.AllSubscriptionFiltered.cs:157-158).
	if err := out.Send(&api.ReadResp{Content: &api.ReadResp_Confirmation{Confirmation: &api.ReadResp_SubscriptionConfirmation{
		SubscriptionId: uuid.NewString(),
	}}}); err != nil {
		return err
	}
	ao := o.GetAll()
	s.mu.Lock()
	next := 0 // index of the next record to consider
	var skipTo uint64
	switch {
	case ao.GetEnd() != nil:
		next = s.visibleLocked()
	case ao.GetPosition() != nil:
		p := ao.GetPosition()
		i, beyond, err := s.positionLocked(p.GetCommitPosition(), p.GetPreparePosition(), s.visibleLocked())
		if err != nil {
			s.mu.Unlock()
			return err
		}
		next = i
		if i < len(s.log) && !beyond && s.log[i].prepare == p.GetPreparePosition() {
			next++ // the start position is exclusive, as in KurrentDB
		}
		if beyond {
			// A start at or past the end goes live at once and skips
			// every live event up to it: nothing says so
			// (K: Enumerator.AllSubscriptionFiltered.cs:167-169,218-226).
			skipTo = p.GetCommitPosition()
		}
	}
	s.mu.Unlock()

	ctx := out.Context()
	caughtUp := false
	for {
		s.mu.Lock()
		batch := append([]record(nil), s.log[next:max(next, s.visibleLocked())]...)
		wait := s.changed
		s.mu.Unlock()
		for _, r := range batch {
			next++
			if r.commit <= skipTo || !m.match(r) {
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
