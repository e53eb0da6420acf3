package boltstore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"time"

	"github.com/slotkeeper/slotkeeper/events"
)

// recordVersion is the first byte of every record in the log bucket. A
// record is written once and never rewritten, so a reader must keep
// understanding every version it ever wrote. Version 2 adds the actor id and
// the client request id after the schema; it is written only when one of
// them is set, so events of workers and the system keep version 1.
const (
	recordVersion1 = 1
	recordVersion2 = 2
	recordVersion  = recordVersion1 // the version of records without the new fields
)

// The record is a compact binary envelope, encoded once per event on append:
//
//	version byte (1)
//	CRC-32C of everything after it: 4 bytes big-endian
//	stream, id, type, actor, correlation id, causation id: uvarint length + bytes
//	revision: uvarint
//	time: varint unix seconds, uvarint nanoseconds
//	schema: varint
//	(version 2 only) actor id, client request id: uvarint length + bytes
//	data: the rest (the JSON payload as given, possibly empty)
//
// The checksum catches damage bbolt cannot see (it checksums only its meta
// pages): a damaged record reads as events.ErrCorrupt, never as a wrong event.
// Binary rather than JSON so that neither the append path nor catch-up pays a
// JSON pass for the envelope; the payload is stored byte for byte.

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// encodeRecord appends the record of e at revision rev of stream to b.
func encodeRecord(b []byte, stream string, rev events.Revision, e *events.EventData) []byte {
	start := len(b)
	v := byte(recordVersion1)
	if e.Meta.ActorID != "" || e.Meta.ClientRequestID != "" {
		v = recordVersion2
	}
	b = append(b, v, 0, 0, 0, 0)
	b = appendString(b, stream)
	b = binary.AppendUvarint(b, rev)
	b = appendString(b, e.ID)
	b = appendString(b, e.Type)
	b = appendString(b, e.Meta.Actor)
	b = appendString(b, e.Meta.CorrelationID)
	b = appendString(b, e.Meta.CausationID)
	b = binary.AppendVarint(b, e.Meta.Time.Unix())
	b = binary.AppendUvarint(b, uint64(e.Meta.Time.Nanosecond()))
	b = binary.AppendVarint(b, int64(e.Meta.Schema))
	if v == recordVersion2 {
		b = appendString(b, e.Meta.ActorID)
		b = appendString(b, e.Meta.ClientRequestID)
	}
	b = append(b, e.Data...)
	binary.BigEndian.PutUint32(b[start+1:], crc32.Checksum(b[start+5:], castagnoli))
	return b
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// recordSize is an upper bound of the encoded size of e, for preallocation.
func recordSize(stream string, e *events.EventData) int {
	return 5 + 9*binary.MaxVarintLen64 + len(stream) + len(e.ID) + len(e.Type) +
		len(e.Meta.Actor) + len(e.Meta.ActorID) + len(e.Meta.CorrelationID) + len(e.Meta.CausationID) +
		len(e.Meta.ClientRequestID) + len(e.Data)
}

var errShortRecord = errors.New("truncated record")

// reader walks a record's fields. The first error sticks.
type reader struct {
	b   []byte
	err error
}

func (r *reader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.err = errShortRecord
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) varint() int64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.err = errShortRecord
		return 0
	}
	r.b = r.b[n:]
	return v
}

// bytes returns a length-prefixed field, aliasing the record.
func (r *reader) bytes() []byte {
	n := r.uvarint()
	if r.err != nil {
		return nil
	}
	if n > uint64(len(r.b)) {
		r.err = errShortRecord
		return nil
	}
	v := r.b[:n:n]
	r.b = r.b[n:]
	return v
}

// header is the part of a record a subscription filter needs. Its slices
// alias the record (valid only inside the read transaction).
type header struct {
	stream, typ []byte
	r           reader // positioned after the type
	rev         uint64
	id          []byte
	version     byte
}

func decodeHeader(b []byte) (header, error) {
	if len(b) == 0 || (b[0] != recordVersion1 && b[0] != recordVersion2) {
		if len(b) == 0 {
			return header{}, fmt.Errorf("%w: empty record", events.ErrCorrupt)
		}
		return header{}, fmt.Errorf("%w: record version %d, this binary reads %d and %d", events.ErrCorrupt, b[0], recordVersion1, recordVersion2)
	}
	if len(b) < 5 {
		return header{}, fmt.Errorf("%w: %v", events.ErrCorrupt, errShortRecord)
	}
	if crc32.Checksum(b[5:], castagnoli) != binary.BigEndian.Uint32(b[1:]) {
		return header{}, fmt.Errorf("%w: record checksum mismatch", events.ErrCorrupt)
	}
	h := header{r: reader{b: b[5:]}, version: b[0]}
	h.stream = h.r.bytes()
	h.rev = h.r.uvarint()
	h.id = h.r.bytes()
	h.typ = h.r.bytes()
	if h.r.err != nil {
		return header{}, fmt.Errorf("%w: %v", events.ErrCorrupt, h.r.err)
	}
	return h, nil
}

// finish decodes the rest of the record into a RecordedEvent that owns its
// memory (copied out of the transaction's mmap).
func (h *header) finish(pos events.Position) (events.RecordedEvent, error) {
	r := &h.r
	actor, corr, cause := r.bytes(), r.bytes(), r.bytes()
	sec, nsec := r.varint(), r.uvarint()
	schema := r.varint()
	var actorID, clientReq []byte
	if h.version == recordVersion2 {
		actorID, clientReq = r.bytes(), r.bytes()
	}
	if r.err != nil {
		return events.RecordedEvent{}, fmt.Errorf("%w: %v", events.ErrCorrupt, r.err)
	}
	ev := events.RecordedEvent{
		ID:       string(h.id),
		Stream:   string(h.stream),
		Revision: h.rev,
		Position: pos,
		Type:     string(h.typ),
		Meta: events.Metadata{
			Actor:           string(actor),
			ActorID:         string(actorID),
			CorrelationID:   string(corr),
			CausationID:     string(cause),
			ClientRequestID: string(clientReq),
			Time:            time.Unix(sec, int64(nsec)).UTC(),
			Schema:          int(schema),
		},
	}
	if len(r.b) > 0 {
		ev.Data = append([]byte(nil), r.b...)
	}
	return ev, nil
}

func decodeRecord(b []byte, pos events.Position) (events.RecordedEvent, error) {
	h, err := decodeHeader(b)
	if err != nil {
		return events.RecordedEvent{}, err
	}
	return h.finish(pos)
}
