package pgwire

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"slices"
	"strings"
	"testing"
	"time"
)

// fakeServer accepts one connection on a port the kernel picks and answers
// as PostgreSQL would: the login with trust (or with auth, when given), then
// each query from answers (by its SQL), until the connection closes. It
// returns the address.
func fakeServer(t *testing.T, auth uint32, answers map[string][]msg) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		c, err := l.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		r := bufio.NewReader(c)
		var n uint32
		if binary.Read(r, binary.BigEndian, &n) != nil {
			return
		}
		startup := make([]byte, n-4)
		if _, err := io.ReadFull(r, startup); err != nil || !strings.Contains(string(startup), "user\x00postgres\x00database\x00postgres\x00") {
			return
		}
		write(c, msg{'R', binary.BigEndian.AppendUint32(nil, auth)}, msg{'S', []byte("a\x00b\x00")}, msg{'Z', []byte{'I'}})
		for {
			var hdr [5]byte
			if _, err := io.ReadFull(r, hdr[:]); err != nil {
				return
			}
			body := make([]byte, binary.BigEndian.Uint32(hdr[1:])-4)
			if _, err := io.ReadFull(r, body); err != nil || hdr[0] != 'Q' {
				return
			}
			write(c, append(answers[strings.TrimSuffix(string(body), "\x00")], msg{'Z', []byte{'I'}})...)
		}
	}()
	return l.Addr().String()
}

type msg struct {
	t    byte
	body []byte
}

func write(c net.Conn, ms ...msg) {
	for _, m := range ms {
		b := append([]byte{m.t}, binary.BigEndian.AppendUint32(nil, uint32(4+len(m.body)))...)
		c.Write(append(b, m.body...))
	}
}

// row is a DataRow whose first column is v.
func row(v string) msg {
	b := binary.BigEndian.AppendUint16(nil, 1)
	b = binary.BigEndian.AppendUint32(b, uint32(len(v)))
	return msg{'D', append(b, v...)}
}

func errorResponse(code, text string) msg {
	return msg{'E', []byte("SERROR\x00C" + code + "\x00M" + text + "\x00\x00")}
}

func TestQuery(t *testing.T) {
	addr := fakeServer(t, 0, map[string][]msg{
		"SELECT v FROM t":                {row("1"), row("22"), msg{'C', []byte("SELECT 2\x00")}},
		"BEGIN; INSERT; INSERT; COMMIT;": {errorResponse("40001", "could not serialize access"), errorResponse("25P02", "current transaction is aborted")},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := Dial(ctx, addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	rows, err := c.Query(ctx, "SELECT v FROM t")
	if err != nil || !slices.Equal(rows, []string{"1", "22"}) {
		t.Fatalf("rows %q, %v", rows, err)
	}
	_, err = c.Query(ctx, "BEGIN; INSERT; INSERT; COMMIT;")
	var se *ServerError
	if !errors.As(err, &se) || se.Msg != "40001 could not serialize access" {
		t.Fatalf("error %v, want the first server error as a *ServerError", err)
	}
	c.Close()
	if _, err := c.Query(ctx, "SELECT v FROM t"); err == nil || errors.As(err, &se) {
		t.Fatalf("a closed connection's query: %v, want a connection error", err)
	}
}

func TestDialRefusesAPassword(t *testing.T) {
	addr := fakeServer(t, 5, nil) // MD5 password asked
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := Dial(ctx, addr); err == nil || !strings.Contains(err.Error(), "trust authentication") {
		t.Fatalf("Dial = %v, want a refusal naming trust authentication", err)
	}
}
