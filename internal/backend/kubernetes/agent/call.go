package agent

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"time"
)

// Call relays one request from in to the daemon's socket at path and its
// reply to out: what chaos agent call does inside the agent's pod, where
// the harness's exec runs it.
func Call(path string, in io.Reader, out io.Writer) error {
	c, err := net.DialTimeout("unix", path, 10*time.Second)
	if err != nil {
		return fmt.Errorf("the agent's daemon does not answer at %s: %w", path, err)
	}
	defer c.Close()
	// One JSON value, not all of in: an exec's standard input may never
	// reach its end.
	var req json.RawMessage
	if err := json.NewDecoder(io.LimitReader(in, 1<<20)).Decode(&req); err != nil {
		return fmt.Errorf("reading the request: %w", err)
	}
	if _, err := c.Write(req); err != nil {
		return err
	}
	if err := c.(*net.UnixConn).CloseWrite(); err != nil {
		return err
	}
	_, err = io.Copy(out, c)
	return err
}
