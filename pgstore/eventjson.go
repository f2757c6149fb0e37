package pgstore

import (
	"github.com/mercurekit/mercure"
	"github.com/mercurekit/mercure/internal/eventjson"
)

// marshalEvent returns the stored JSON of e's update and, withTime, of
// its time (see internal/eventjson).
func marshalEvent(e *mercure.Event, withTime bool) ([]byte, error) {
	return eventjson.Marshal(&eventjson.Event{
		Topics: e.Topics, Data: e.Data, Private: e.Private, ID: e.ID, Type: e.Type, Retry: e.Retry,
		Time: e.Time,
	}, withTime)
}

// unmarshalEvent returns the event whose stored JSON b is, without its
// Seq; its Time is zero unless b holds one.
func unmarshalEvent(b []byte) (*mercure.Event, error) {
	j, err := eventjson.Unmarshal(b)
	if err != nil {
		return nil, err
	}
	return &mercure.Event{
		Update: mercure.Update{Topics: j.Topics, Data: j.Data, Private: j.Private, ID: j.ID, Type: j.Type, Retry: j.Retry},
		Time:   j.Time,
	}, nil
}
