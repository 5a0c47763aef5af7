// Package markdown escapes text from a run directory for the Markdown pages
// made of it (chaos share, chaos evidence), which GitHub renders: a name,
// a detail or a log line must read as text, never as a heading, a list, a
// link, a code fence or HTML. It is the one escaping helper those pages use.
package markdown

import "strings"

// lineBreaks are folded to one space in running text and table cells.
var lineBreaks = strings.NewReplacer("\r\n", " ", "\n", " ", "\r", " ", "\u2028", " ", "\u2029", " ")

// inline escapes what Markdown and GitHub read as markup in running text:
// emphasis, code, links, HTML, table pipes, and "$" pairs as math.
var inline = strings.NewReplacer("\\", "\\\\", "$", "\\$", "<", "&lt;", ">", "&gt;", "*", "\\*", "_", "\\_", "`", "\\`", "[", "\\[", "]", "\\]", "|", "\\|")

// Inline escapes text for running Markdown (a heading, a paragraph, a list
// item) and keeps it on one line: line breaks become spaces, so nothing
// can start a new block.
func Inline(s string) string {
	s = inline.Replace(lineBreaks.Replace(s))
	// Text that starts with these would read as a nested list, a quote or
	// a heading after a list marker; escaping them costs nothing.
	if s != "" && strings.ContainsRune("-+>#", rune(s[0])) {
		s = "\\" + s
	}
	return s
}

// cellReplacer escapes text for a table cell: "|" and line breaks would end
// the cell or the row, "<" would start HTML and "$" math on GitHub.
var cellReplacer = strings.NewReplacer("\\", "\\\\", "|", "\\|", "$", "\\$", "\r\n", "<br>", "\n", "<br>", "\r", "<br>", "<", "&lt;", ">", "&gt;", "`", "\\`", "*", "\\*", "_", "\\_")

// Cell escapes text for a table cell; line breaks become <br>.
func Cell(s string) string { return cellReplacer.Replace(s) }

// Code renders an identifier as inline code, or, when it holds what would
// end the code span or the line, as escaped text.
func Code(s string) string {
	if s == "" || strings.ContainsAny(s, "`|\r\n\u2028\u2029") {
		return Cell(lineBreaks.Replace(s))
	}
	return "`" + s + "`"
}

// Fence returns a code fence for content: more backticks than the longest
// run of backticks in it, so no line of the content can close the block.
// Inside a fenced block nothing is markup, HTML included.
func Fence(content string) string {
	longest, run := 0, 0
	for i := 0; i < len(content); i++ {
		if content[i] == '`' {
			run++
			longest = max(longest, run)
		} else {
			run = 0
		}
	}
	return strings.Repeat("`", max(3, longest+1))
}

// Paragraph folds all whitespace to single spaces, so a YAML block scalar
// reads as one line.
func Paragraph(s string) string { return strings.Join(strings.Fields(s), " ") }
