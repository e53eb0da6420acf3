package consumer

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
)

// Packed is a checkpoint state that would be too big as plain JSON for one
// event (the stores take events of up to 1 MiB): the state's JSON,
// gzipped (and base64-encoded by encoding/json). A fold's JSON repeats its
// field names for every slot, so it shrinks several times.
type Packed struct {
	Gzip []byte `json:"gzip"`
}

// Pack encodes state as a Packed's JSON.
func Pack(state any) ([]byte, error) {
	b, err := json.Marshal(state)
	if err != nil {
		return nil, err
	}
	var z bytes.Buffer
	// Speed over size: a checkpoint is written while the consumer's
	// subscription waits.
	w, err := gzip.NewWriterLevel(&z, gzip.BestSpeed)
	if err != nil {
		return nil, err
	}
	if _, err := w.Write(b); err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return json.Marshal(Packed{Gzip: z.Bytes()})
}

// Unpack decodes the state p holds into state.
func (p Packed) Unpack(state any) error {
	r, err := gzip.NewReader(bytes.NewReader(p.Gzip))
	if err != nil {
		return err
	}
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, state)
}
