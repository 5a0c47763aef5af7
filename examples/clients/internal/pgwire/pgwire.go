// Package pgwire speaks what the example clients need of PostgreSQL's wire
// protocol, with the standard library only: a connection as user postgres
// to database postgres under trust authentication, and the simple query
// protocol.
package pgwire

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"strings"
)

// ServerError is an error PostgreSQL answered with (its code and message):
// the statement, or the transaction it was in, did not commit.
type ServerError struct{ Msg string }

func (e *ServerError) Error() string { return e.Msg }

// Conn is one connection.
type Conn struct {
	c net.Conn
	r *bufio.Reader
}

// Dial connects to addr (a path is a Unix socket) and logs in. An error
// means no statement was sent.
func Dial(ctx context.Context, addr string) (*Conn, error) {
	network := "tcp"
	if strings.HasPrefix(addr, "/") {
		network = "unix"
	}
	var dialer net.Dialer
	c, err := dialer.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	if dl, ok := ctx.Deadline(); ok {
		c.SetDeadline(dl)
	}
	d := &Conn{c: c, r: bufio.NewReader(c)}
	var b bytes.Buffer
	binary.Write(&b, binary.BigEndian, int32(196608)) // protocol 3.0
	for _, kv := range []string{"user", "postgres", "database", "postgres"} {
		b.WriteString(kv)
		b.WriteByte(0)
	}
	b.WriteByte(0)
	msg := make([]byte, 4, 4+b.Len())
	binary.BigEndian.PutUint32(msg, uint32(4+b.Len()))
	msg = append(msg, b.Bytes()...)
	if _, err := c.Write(msg); err != nil {
		c.Close()
		return nil, err
	}
	for {
		t, body, err := d.readMsg()
		if err != nil {
			c.Close()
			return nil, err
		}
		switch t {
		case 'R':
			if len(body) < 4 || binary.BigEndian.Uint32(body) != 0 {
				c.Close()
				return nil, errors.New("the server asks for a password; the examples use trust authentication")
			}
		case 'E':
			c.Close()
			return nil, serverError(body)
		case 'Z':
			return d, nil
		}
	}
}

// Close closes the connection.
func (d *Conn) Close() error { return d.c.Close() }

// Query runs sql, which may hold several statements, under ctx's deadline
// and returns the first column of each row they gave. An error is a
// *ServerError when PostgreSQL answered with one (the first), else the
// connection's: what became of sql is then unknown.
func (d *Conn) Query(ctx context.Context, sql string) ([]string, error) {
	if dl, ok := ctx.Deadline(); ok {
		d.c.SetDeadline(dl)
	}
	msg := []byte{'Q', 0, 0, 0, 0}
	msg = append(msg, sql...)
	msg = append(msg, 0)
	binary.BigEndian.PutUint32(msg[1:], uint32(len(msg)-1))
	if _, err := d.c.Write(msg); err != nil {
		return nil, err
	}
	var rows []string
	var serr error
	for {
		t, body, err := d.readMsg()
		if err != nil {
			return nil, err
		}
		switch t {
		case 'D':
			if len(body) >= 6 {
				n := int32(binary.BigEndian.Uint32(body[2:6]))
				if n >= 0 && int(6+n) <= len(body) {
					rows = append(rows, string(body[6:6+n]))
				}
			}
		case 'E':
			if serr == nil {
				serr = serverError(body)
			}
		case 'Z':
			return rows, serr
		}
	}
}

func (d *Conn) readMsg() (byte, []byte, error) {
	var hdr [5]byte
	if _, err := io.ReadFull(d.r, hdr[:]); err != nil {
		return 0, nil, err
	}
	n := binary.BigEndian.Uint32(hdr[1:])
	if n < 4 {
		return 0, nil, errors.New("a message shorter than its length field")
	}
	body := make([]byte, n-4)
	if _, err := io.ReadFull(d.r, body); err != nil {
		return 0, nil, err
	}
	return hdr[0], body, nil
}

// serverError is an ErrorResponse's code and message.
func serverError(body []byte) *ServerError {
	var parts []string
	for _, f := range bytes.Split(body, []byte{0}) {
		if len(f) > 1 && (f[0] == 'C' || f[0] == 'M') {
			parts = append(parts, string(f[1:]))
		}
	}
	return &ServerError{Msg: strings.Join(parts, " ")}
}
