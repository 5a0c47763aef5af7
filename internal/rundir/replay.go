package rundir

import (
	"strconv"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// ReplayCommand is the command line that runs an experiment again with the
// same seed: chaos run --adapter ADAPTER --seed SEED EXPERIMENT-FILE, every
// argument quoted for the shell, so a file named "a;touch X $(touch Y).yaml"
// is one argument when the line is pasted, never a second command.
func ReplayCommand(adapterRef string, seed uint64, experimentFile string) string {
	return ShellLine("chaos", "run", "--adapter", adapterRef, "--seed", strconv.FormatUint(seed, 10), experimentFile)
}

// ShellLine joins args into one shell command line, each quoted as needed
// (bash syntax: $'...' for characters that cannot be typed).
func ShellLine(args ...string) string {
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = ShellQuote(a)
	}
	return strings.Join(out, " ")
}

// ShellQuote quotes one argument for the shell; an argument that needs no
// quoting is returned as it is.
func ShellQuote(s string) string {
	q, err := syntax.Quote(s, syntax.LangBash)
	if err != nil {
		// Only a NUL byte, which no path or argument can hold, gets here:
		// drop it and quote the rest.
		q, err = syntax.Quote(strings.ReplaceAll(s, "\x00", ""), syntax.LangBash)
		if err != nil {
			return "''"
		}
	}
	return q
}

// ReplayLine is the replay command to show for the run this manifest
// describes. Its replay text is shown as written only when it is one plain
// chaos run command: literal words, no expansion, substitution, redirection
// or second command. Anything else (a run directory from elsewhere, or one
// written before replay lines were quoted) is rebuilt from the manifest's
// fields (the adapter, the seed, the experiment file), quoted, so pasting
// what a page shows never does something else.
func (m *Manifest) ReplayLine() string {
	if m == nil {
		return ""
	}
	if plainChaosRun(m.Replay) {
		return m.Replay
	}
	return m.rebuiltReplay()
}

// rebuiltReplay is the replay command made again from the manifest's
// fields, each quoted.
func (m *Manifest) rebuiltReplay() string {
	if m.Experiment.File == "" {
		return ""
	}
	ref := m.Adapter.File
	if ref == "" || ref == "built in" {
		ref = m.Adapter.ID
	}
	return ReplayCommand(ref, m.Seed, m.Experiment.File)
}

// plainChaosRun reports whether line is a single "chaos run ..." command
// whose words are all literal text.
func plainChaosRun(line string) bool {
	if line == "" || strings.ContainsAny(line, "\n\r\x00") || len(line) > 64<<10 {
		return false
	}
	f, err := syntax.NewParser(syntax.Variant(syntax.LangBash)).Parse(strings.NewReader(line), "")
	if err != nil || len(f.Stmts) != 1 {
		return false
	}
	st := f.Stmts[0]
	if st.Negated || st.Background || st.Coprocess || len(st.Redirs) > 0 {
		return false
	}
	call, ok := st.Cmd.(*syntax.CallExpr)
	if !ok || len(call.Assigns) > 0 || len(call.Args) < 2 {
		return false
	}
	for i, w := range call.Args {
		lit, ok := literal(w)
		if !ok || i == 0 && lit != "chaos" || i == 1 && lit != "run" {
			return false
		}
	}
	return true
}

// literal is a word's text when it is made only of plain, single-quoted
// and double-quoted literal parts.
func literal(w *syntax.Word) (string, bool) {
	var b strings.Builder
	for _, p := range w.Parts {
		switch x := p.(type) {
		case *syntax.Lit:
			b.WriteString(x.Value)
		case *syntax.SglQuoted:
			if x.Dollar {
				return "", false
			}
			b.WriteString(x.Value)
		case *syntax.DblQuoted:
			if x.Dollar {
				return "", false
			}
			for _, q := range x.Parts {
				l, ok := q.(*syntax.Lit)
				if !ok {
					return "", false
				}
				b.WriteString(l.Value)
			}
		default:
			return "", false
		}
	}
	return b.String(), true
}
