// Package eventjson is the compact JSON form in which the durable and
// shared stores keep an event's update and time.
//
// It does not import the root package: its Update has the fields of
// mercure.Update, in the same order and of the same types, so that a
// store converts one to the other with a type conversion
// (eventjson.Update(e.Update), mercure.Update(u)), which stops compiling
// should the two ever differ.
package eventjson

import (
	"crypto/sha256"
	"encoding/json"
	"strconv"
	"time"
)

// Update is mercure.Update, field for field.
type Update struct {
	Topics  []string
	Data    string
	Private bool
	ID      string
	Type    string
	Retry   *time.Duration
}

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

// Marshal returns the JSON of u and, unless at is zero, of the event's
// time (a store that keeps the time apart passes the zero time).
func Marshal(u Update, at time.Time) ([]byte, error) {
	r := record{Topics: u.Topics, Data: u.Data, Private: u.Private, ID: u.ID, Type: u.Type}
	if u.Retry != nil {
		ns := int64(*u.Retry)
		r.Retry = &ns
	}
	if !at.IsZero() {
		ns := at.UnixNano()
		r.Time = &ns
	}
	return json.Marshal(r)
}

// Unmarshal returns the update and the time whose JSON b is; the time is
// zero unless b holds one.
func Unmarshal(b []byte) (Update, time.Time, error) {
	var r record
	if err := json.Unmarshal(b, &r); err != nil {
		return Update{}, time.Time{}, err
	}
	u := Update{Topics: r.Topics, Data: r.Data, Private: r.Private, ID: r.ID, Type: r.Type}
	if r.Retry != nil {
		d := time.Duration(*r.Retry)
		u.Retry = &d
	}
	var at time.Time
	if r.Time != nil {
		at = time.Unix(0, *r.Time)
	}
	return u, at, nil
}

// MarshalDigest returns what Marshal(u, at) does, and the SHA-256 of the
// JSON of u alone: two events of the same update (a publisher's retry)
// have the same digest, whatever their times.
func MarshalDigest(u Update, at time.Time) (b []byte, digest [sha256.Size]byte, err error) {
	content, err := Marshal(u, time.Time{})
	if err != nil {
		return nil, digest, err
	}
	digest = sha256.Sum256(content)
	if at.IsZero() {
		return content, digest, nil
	}
	// The time is the record's last field: content ends with the '}'
	// that the time goes before.
	b = append(content[:len(content)-1], `,"ts":`...)
	b = strconv.AppendInt(b, at.UnixNano(), 10)
	return append(b, '}'), digest, nil
}
