package cli

import (
	"bytes"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spf13/cobra"
)

// Test-only commands: one that never looks at its context (a read blocked
// in the kernel), one that stops when its context ends.
func init() {
	extraCommands = append(extraCommands,
		func(s *streams) *cobra.Command {
			return &cobra.Command{Use: "test-block-forever", Hidden: true, RunE: func(cmd *cobra.Command, args []string) error {
				select {}
			}}
		},
		func(s *streams) *cobra.Command {
			return &cobra.Command{Use: "test-stop-when-asked", Hidden: true, RunE: func(cmd *cobra.Command, args []string) error {
				<-cmd.Context().Done()
				return interruptedErr(cmd.Context(), "waiting")
			}}
		})
}

// signalAfter is a State.Signals that delivers SIGINT after d.
func signalAfter(d time.Duration) func() (<-chan os.Signal, func()) {
	return func() (<-chan os.Signal, func()) {
		ch := make(chan os.Signal, 1)
		t := time.AfterFunc(d, func() { ch <- syscall.SIGINT })
		return ch, func() { t.Stop() }
	}
}

// Every command stops within the grace time of Ctrl-C or SIGTERM, says
// so, and exits 2, even one blocked where no context reaches (evaluate,
// report and replay stuck on a FIFO ignored Ctrl-C for good).
func TestEveryCommandStopsWhenAsked(t *testing.T) {
	for _, c := range []struct {
		cmd, want string
	}{
		{"test-block-forever", "interrupted by SIGINT: chaos test-block-forever stopped before it finished"},
		{"test-stop-when-asked", "interrupted by SIGINT while waiting"},
	} {
		var out, errb bytes.Buffer
		start := time.Now()
		code := Main(State{Args: []string{c.cmd}, Stdout: &out, Stderr: &errb, Env: os.Environ(), Dir: t.TempDir(),
			Signals: signalAfter(100 * time.Millisecond), Grace: 500 * time.Millisecond})
		took := time.Since(start)
		if code != ExitError || !strings.Contains(errb.String(), c.want) {
			t.Errorf("%s: exit %d, stderr %q; want 2 and %q", c.cmd, code, errb.String(), c.want)
		}
		if took > 5*time.Second {
			t.Errorf("%s: Main returned %v after it started", c.cmd, took)
		}
	}
}
