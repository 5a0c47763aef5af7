package cli

import (
	"fmt"
	"io"
	"strings"
)

// wrapWidth is the column prose is wrapped at.
const wrapWidth = 80

// writeWrapped writes text as paragraphs wrapped at wrapWidth, each line
// indented. Blank lines in text separate paragraphs.
func writeWrapped(w io.Writer, indent, text string) {
	for _, line := range wrap(text, wrapWidth-len(indent)) {
		if line == "" {
			fmt.Fprintln(w)
			continue
		}
		fmt.Fprintf(w, "%s%s\n", indent, line)
	}
}

func wrap(text string, width int) []string {
	var out []string
	paras := strings.Split(strings.TrimSpace(text), "\n\n")
	for pi, p := range paras {
		if pi > 0 {
			out = append(out, "")
		}
		line := ""
		for _, word := range strings.Fields(p) {
			if line != "" && len(line)+1+len(word) > width {
				out = append(out, line)
				line = ""
			}
			if line != "" {
				line += " "
			}
			line += word
		}
		if line != "" {
			out = append(out, line)
		}
	}
	return out
}
