// Package eventjson is the compact JSON form in which the durable and
// shared stores keep an event's update and time.
//
// It does not import the root package: a store converts its
// mercure.Event to and from an Event (the same fields, without Seq).
package eventjson

import (
	"encoding/json"
	"time"
)

// Event is the stored part of a mercure.Event: the fields of its update
// and its time.
type Event struct {
	Topics  []string
	Data    string
	Private bool
	ID      string
	Type    string
	Retry   *time.Duration
	Time    time.Time
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

// Marshal returns the JSON of e's update and, withTime, of its time (a
// store that keeps the time apart leaves it out).
func Marshal(e *Event, withTime bool) ([]byte, error) {
	r := record{Topics: e.Topics, Data: e.Data, Private: e.Private, ID: e.ID, Type: e.Type}
	if e.Retry != nil {
		ns := int64(*e.Retry)
		r.Retry = &ns
	}
	if withTime {
		ns := e.Time.UnixNano()
		r.Time = &ns
	}
	return json.Marshal(r)
}

// Unmarshal returns the event whose JSON b is; its Time is zero unless b
// holds one.
func Unmarshal(b []byte) (*Event, error) {
	var r record
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, err
	}
	e := &Event{Topics: r.Topics, Data: r.Data, Private: r.Private, ID: r.ID, Type: r.Type}
	if r.Retry != nil {
		d := time.Duration(*r.Retry)
		e.Retry = &d
	}
	if r.Time != nil {
		e.Time = time.Unix(0, *r.Time)
	}
	return e, nil
}
