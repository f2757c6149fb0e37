//go:build !linux

package netcut

import "net"

// shutdown writes last on c: elsewhere a hub keeps the net.Conn, which
// Close then ends.
func shutdown(c net.Conn, last []byte) error {
	if len(last) > 0 {
		_, err := c.Write(last)
		return err
	}
	return nil
}
