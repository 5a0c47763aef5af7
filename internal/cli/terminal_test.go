package cli

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"
)

func TestTerminalCaps(t *testing.T) {
	for _, c := range []struct {
		tty           bool
		term, noColor string
		wantTTY, want bool
	}{
		{true, "xterm-256color", "", true, true},
		{true, "xterm", "1", true, false},
		{true, "dumb", "", false, false},
		{true, "dumb", "1", false, false},
		{false, "xterm", "", false, false},
	} {
		tty, esc := terminalCaps(c.tty, c.term, c.noColor)
		if tty != c.wantTTY || esc != c.want {
			t.Errorf("terminalCaps(%v, %q, %q) = %v, %v; want %v, %v", c.tty, c.term, c.noColor, tty, esc, c.wantTTY, c.want)
		}
	}
}

// openPTY opens a pseudo-terminal: the side chaos writes to, and the side
// the test reads.
func openPTY(t *testing.T) (tty, ptm *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminal: %v", err)
	}
	if err := unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		m.Close()
		t.Skipf("unlockpt: %v", err)
	}
	n, err := unix.IoctlGetInt(int(m.Fd()), unix.TIOCGPTN)
	if err != nil {
		m.Close()
		t.Skipf("ptsname: %v", err)
	}
	s, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		m.Close()
		t.Skipf("opening the terminal: %v", err)
	}
	if err := unix.IoctlSetWinsize(int(s.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Row: 40, Col: 120}); err != nil {
		t.Logf("window size: %v", err)
	}
	t.Cleanup(func() { s.Close(); m.Close() })
	return s, m
}

// chaos run on a terminal: the live status line and a coloured check block,
// but not one escape sequence under NO_COLOR or TERM=dumb (there were 48
// reverse-video sequences under both).
func TestRunOnATerminal(t *testing.T) {
	if testing.Short() {
		t.Skip("runs processes")
	}
	// A run long enough for the status line to be drawn a few times.
	x := "apiVersion: chaos/v1alpha1\nid: slow-hello\ntimeout: 1m\nworkloads:\n  - name: hello\n    run: sleep 1\n    checks:\n      - {name: exited-ok, kind: exit-code, equals: 0}\nflow: hello\n"
	f := writeTemp(t, map[string]string{"slow.yaml": x}) + "/slow.yaml"
	for _, c := range []struct {
		name, term, noColor string
		escapes, status     bool
		// events: each event a log line (-v on a terminal, or no
		// terminal that can redraw), else a line per step.
		verbose, events bool
	}{
		{"terminal", "xterm", "", true, true, false, false},
		{"terminal -v", "xterm", "", true, true, true, true},
		{"NO_COLOR", "xterm", "1", false, true, false, false},
		{"TERM=dumb", "dumb", "", false, false, false, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv("TERM", c.term)
			t.Setenv("NO_COLOR", c.noColor)
			tty, ptm := openPTY(t)
			var got bytes.Buffer
			var wg sync.WaitGroup
			wg.Add(1)
			go func() { defer wg.Done(); io.Copy(&got, ptm) }()
			dir, _ := os.Getwd()
			args := []string{"run", "--adapter", "local", "--runs-dir", t.TempDir(), f}
			if c.verbose {
				args = append(args[:1], append([]string{"-v"}, args[1:]...)...)
			}
			code := Main(State{Args: args, Stdout: tty, Stderr: tty, Env: os.Environ(), Dir: dir})
			tty.Close() // the reader sees the end once everything is read
			wg.Wait()
			out := got.String()
			if code != 0 {
				t.Fatalf("exit %d\n%s", code, out)
			}
			esc := strings.Count(out, "\033[")
			if c.escapes && (esc == 0 || !strings.Contains(out, "\033[7m") || !strings.Contains(out, "\033[32mok   \033[0m hello-0/exited-ok")) {
				t.Errorf("on a terminal: %d escapes, want a reverse-video status line and a green ok\n%q", esc, out)
			}
			if !c.escapes && esc != 0 {
				t.Errorf("%d escape sequences written under %s\n%q", esc, c.name, out)
			}
			// The status line (drawn after a carriage return) shows the
			// instances, on a terminal that can redraw.
			status := strings.Contains(out, "instances: 1 Running")
			if status != c.status {
				t.Errorf("status line shown: %v, want %v\n%q", status, c.status, out)
			}
			if !strings.Contains(out, "PASS") {
				t.Errorf("no verdict\n%q", out)
			}
			events := strings.Contains(out, ` instance.state {"workload": "hello"`)
			steps := strings.Contains(out, "s ▶ hello") && strings.Contains(out, "s   hello-0 running")
			if events != c.events || steps == c.events {
				t.Errorf("event lines %v, step lines %v; want events %v\n%q", events, steps, c.events, out)
			}
		})
	}
}

// --quiet prints the verdict and the run directory, nothing else on either
// stream; --verbose the detail of every check.
func TestQuietAndVerbose(t *testing.T) {
	if testing.Short() {
		t.Skip("runs processes")
	}
	runs := t.TempDir()
	code, out, errs := chaos(t, "run", "--quiet", "--adapter", "local", "--runs-dir", runs, hello)
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if code != 0 || len(lines) != 2 || lines[0] != "PASS" || !strings.HasPrefix(lines[1], runs+"/hello-world/") || errs != "" {
		t.Fatalf("run --quiet: exit %d\nstdout %q\nstderr %q", code, out, errs)
	}
	run := lines[1]
	code, out, errs = chaos(t, "evaluate", "-q", "--trust", run)
	if code != 0 || out != "PASS\n"+run+"\n" || errs != "" {
		t.Errorf("evaluate -q: exit %d\nstdout %q\nstderr %q", code, out, errs)
	}
	code, out, _ = chaos(t, "evaluate", "-v", "--trust", run)
	if code != 0 || !strings.Contains(out, "  ok    hello-0/exited-ok\n          exit code 0\n") {
		t.Errorf("evaluate -v shows no detail of a passed check: exit %d\n%s", code, out)
	}
	code, out, _ = chaos(t, "evaluate", "--trust", run)
	if code != 0 || strings.Contains(out, "exit code 0") {
		t.Errorf("evaluate without -v shows the detail of a passed check: exit %d\n%s", code, out)
	}
	wantRun(t, ExitInvalid, "", "chaos: --quiet and --verbose exclude each other\n", "evaluate", "-q", "-v", run)
	code, out, errs = chaos(t, "preflight", "-q", "--adapter", "local", hello)
	if code != 0 || out != "ready\n" || errs != "" {
		t.Errorf("preflight -q: exit %d\nstdout %q\nstderr %q", code, out, errs)
	}
}
