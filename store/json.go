package store

import (
	"crypto/sha256"
	"encoding/json"
	"strconv"
	"time"
)

// record is the JSON form of an event. Short keys: every stored event
// carries them.
type record struct {
	Topics  []string `json:"t"`
	Data    string   `json:"d,omitempty"`
	Private bool     `json:"p,omitempty"`
	ID      string   `json:"i"`
	Type    string   `json:"y,omitempty"`
	Retry   *int64   `json:"r,omitempty"`  // nanoseconds
	Time    *int64   `json:"ts,omitempty"` // Unix nanoseconds
}

// MarshalEvent returns the compact JSON form in which the stores of this
// repository keep an event: its update and, unless it is zero, its time
// (a store that keeps the time apart clears it in a copy). Seq is the
// store's to keep. digest is the SHA-256 of the update alone: two events
// of the same update (see [Event.SameUpdate]) have the same digest,
// whatever their times, so a store can tell a retry by it.
func MarshalEvent(e *Event) (data []byte, digest [sha256.Size]byte, err error) {
	r := record{Topics: e.Topics, Data: e.Data, Private: e.Private, ID: e.ID, Type: e.Type}
	if e.Retry != nil {
		ns := int64(*e.Retry)
		r.Retry = &ns
	}
	content, err := json.Marshal(r)
	if err != nil {
		return nil, digest, err
	}
	digest = sha256.Sum256(content)
	if e.Time.IsZero() {
		return content, digest, nil
	}
	// The time is the record's last field: content ends with the '}'
	// that the time goes before.
	data = append(content[:len(content)-1], `,"ts":`...)
	data = strconv.AppendInt(data, e.Time.UnixNano(), 10)
	return append(data, '}'), digest, nil
}

// UnmarshalEvent sets the update and the time of e from data, the JSON
// of [MarshalEvent]; the time is zero unless data holds one. It leaves
// e.Seq as it is.
func UnmarshalEvent(data []byte, e *Event) error {
	var r record
	if err := json.Unmarshal(data, &r); err != nil {
		return err
	}
	e.Topics, e.Data, e.Private, e.ID, e.Type, e.Retry, e.Time = r.Topics, r.Data, r.Private, r.ID, r.Type, nil, time.Time{}
	if r.Retry != nil {
		d := time.Duration(*r.Retry)
		e.Retry = &d
	}
	if r.Time != nil {
		e.Time = time.Unix(0, *r.Time)
	}
	return nil
}
