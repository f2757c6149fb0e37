package simconn

import (
	"errors"
	"net"
	"testing"
)

func TestWriteNowCounts(t *testing.T) {
	ev := []byte("id: 1\ndata: x\n\n")
	tests := []struct {
		name                     string
		buffer                   int
		writes                   [][][]byte
		taken                    []int
		events, comments, nbytes int64
	}{
		{"unbounded", 0, [][][]byte{{[]byte("f\r\n"), ev, []byte(":\n"), []byte("\r\n")}}, []int{3 + 15 + 2 + 2}, 1, 1, 22},
		{"an event cut by a full buffer counts once", 10,
			[][][]byte{{[]byte("f\r\n"), ev}, {ev[7:]}}, []int{10, 0}, 1, 0, 10},
		{"a slice not taken at all counts when taken", 3,
			[][][]byte{{[]byte("f\r\n"), ev}}, []int{3}, 0, 0, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var total Counts
			c := New(&total)
			c.SetBuffer(tt.buffer)
			for i, iov := range tt.writes {
				n, err := c.WriteNow(iov)
				if err != nil || n != tt.taken[i] {
					t.Fatalf("write %d took %d, %v; want %d", i, n, err, tt.taken[i])
				}
			}
			if c.Events() != tt.events || c.Comments() != tt.comments || c.Bytes() != tt.nbytes {
				t.Errorf("events, comments, bytes = %d, %d, %d; want %d, %d, %d", c.Events(), c.Comments(), c.Bytes(), tt.events, tt.comments, tt.nbytes)
			}
			if total.Events.Load() != tt.events || total.Bytes.Load() != tt.nbytes {
				t.Errorf("totals %d events, %d bytes", total.Events.Load(), total.Bytes.Load())
			}
		})
	}
}

func TestWatch(t *testing.T) {
	c := New(nil)
	var got []string
	c.Watch(func(gone, writable bool) {
		switch {
		case gone:
			got = append(got, "gone")
		case writable:
			got = append(got, "writable")
		}
	})
	c.SetBuffer(4)
	c.Consume(4) // no short write yet: nothing to say
	if n, _ := c.WriteNow([][]byte{[]byte("123456")}); n != 4 {
		t.Fatalf("took %d, want 4", n)
	}
	c.Consume(2)
	c.Consume(2) // said once per short write
	c.Leave()
	if _, err := c.WriteNow([][]byte{[]byte("x")}); !errors.Is(err, net.ErrClosed) {
		t.Errorf("write after the client left: %v", err)
	}
	if len(got) != 2 || got[0] != "writable" || got[1] != "gone" {
		t.Errorf("notified %v, want [writable gone]", got)
	}
	c.Close()
	if c.Close() == nil {
		t.Error("second Close succeeded")
	}
}
