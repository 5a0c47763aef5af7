package report

import (
	"bytes"
	"encoding/json"
	"image/png"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/net/html"

	"github.com/chaos-harness/chaos/internal/rundir"
	"github.com/chaos-harness/chaos/internal/runview"
)

// variantRun is smallRun with the verdict of a passing, a failing or an
// XFAIL run: pass makes every check hold; fail makes counter-1's exit-code
// check an unexpected failure (the others stay known failures).
func variantRun(t *testing.T, verdict string) string {
	t.Helper()
	root := smallRun(t, t.TempDir())
	p := filepath.Join(root, "verdict.json")
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	var v rundir.Verdict
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatal(err)
	}
	switch verdict {
	case "PASS":
		for i := range v.Checks {
			v.Checks[i].OK, v.Checks[i].Result, v.Checks[i].Expectation = true, "ok", nil
		}
		v.Counts = map[string]int{"ok": len(v.Checks)}
		v.Warnings = nil
	case "FAIL":
		for i := range v.Checks {
			if v.Checks[i].ID == "counter-1/exited-ok" {
				v.Checks[i].Result, v.Checks[i].Expectation = "fail", nil
			}
		}
		v.Counts = map[string]int{"ok": 3, "xfail": 2, "fail": 1}
	}
	v.Verdict = verdict
	out, _ := json.MarshalIndent(v, "", "  ")
	if err := os.WriteFile(p, out, 0o644); err != nil {
		t.Fatal(err)
	}
	return root
}

// sectionOrder is the ids of the page's h2 headings, in order.
func sectionOrder(doc *html.Node) []string {
	var ids []string
	for _, h := range find(doc, tag("h2")) {
		ids = append(ids, attr(h, "id"))
	}
	return ids
}

// The page of a passing, a failing and an XFAIL run, in a real browser:
// the sections in order (what failed at the top, nothing empty drawn), the
// unexpected failures before the known ones, each with its description
// and causes, every file of the run directory linked, the script run to
// its end with nothing on the console; and a screenshot that decodes
// (CHAOS_REPORT_KEEP keeps it, to look at).
func TestReportScreenshots(t *testing.T) {
	bin := chromium(t)
	for _, c := range []struct {
		verdict  string
		sections []string
		failures []string // ids of the failure cards, in order
		heading  string
	}{
		{"PASS", []string{"timeline-heading", "lines", "metrics", "checks", "inputs", "files", "logs"}, nil, ""},
		{"FAIL", []string{"failures", "timeline-heading", "lines", "metrics", "checks", "errors", "inputs", "files", "logs"},
			[]string{"counter-1/exited-ok", "counter-0/exited-ok", "counter-2/exited-ok"}, "What failed"},
		{"XFAIL", []string{"failures", "timeline-heading", "lines", "metrics", "checks", "errors", "inputs", "files", "logs"},
			[]string{"counter-0/exited-ok", "counter-1/exited-ok", "counter-2/exited-ok"}, "Known failures"},
	} {
		t.Run(c.verdict, func(t *testing.T) {
			root := variantRun(t, c.verdict)
			r, err := runview.Load(root)
			if err != nil {
				t.Fatal(err)
			}
			if err := WriteFile(r); err != nil {
				t.Fatal(err)
			}
			page := filepath.Join(root, FileName)
			dom, _ := runChromium(t, bin, "--dump-dom", "file://"+page)
			doc, err := html.Parse(strings.NewReader(dom))
			if err != nil {
				t.Fatal(err)
			}
			if body := find(doc, tag("body")); len(body) != 1 || attr(body[0], "data-rendered") != "1" {
				t.Fatal("the script did not run to its end")
			}
			if got := strings.Join(sectionOrder(doc), " "); got != strings.Join(c.sections, " ") {
				t.Errorf("sections %s, want %s", got, strings.Join(c.sections, " "))
			}
			if v := find(doc, func(n *html.Node) bool { return attr(n, "id") == "verdict" }); len(v) != 1 || text(v[0]) != c.verdict {
				t.Errorf("verdict %v", v)
			}

			// What failed, at the top: unexpected failures first.
			cards := find(doc, func(n *html.Node) bool { return n.Data == "div" && hasClass(n, "failure") })
			var ids []string
			for _, card := range cards {
				ids = append(ids, strings.TrimPrefix(attr(card, "id"), "failure-"))
			}
			if strings.Join(ids, " ") != strings.Join(c.failures, " ") {
				t.Errorf("failure cards %v, want %v", ids, c.failures)
			}
			if c.heading != "" {
				if h := find(doc, func(n *html.Node) bool { return attr(n, "id") == "failures" }); len(h) != 1 || text(h[0]) != c.heading {
					t.Errorf("failures heading %v, want %q", h, c.heading)
				}
			}
			for i, card := range cards {
				body := text(card)
				if !strings.Contains(body, "For each counter instance: the script exited with code 0.") {
					t.Errorf("card %s lacks the check's description:\n%s", ids[i], body)
				}
				// The gateway's outage is what the counters ran into, and
				// how each ended is said, not only in a tooltip.
				if !strings.Contains(body, "fault gateway-down (outage on gateway, run 1) at 22.861 s to 41.038 s, while") || !strings.Contains(body, "ended Failed (StartFailed) at 42.1 s") {
					t.Errorf("card %s lacks its causes:\n%s", ids[i], body)
				}
				if zooms := find(card, func(n *html.Node) bool {
					return n.Data == "a" && hasClass(n, "zoom") && strings.HasPrefix(attr(n, "href"), "#t=")
				}); len(zooms) == 0 {
					t.Errorf("card %s has no link that zooms to a cause", ids[i])
				}
				known := hasClass(card, "known")
				if unexpected := c.verdict == "FAIL" && i == 0; known == unexpected {
					t.Errorf("card %s: known %v", ids[i], known)
				}
			}

			// Every file of the run directory is linked.
			links := map[string]bool{}
			for _, a := range find(doc, tag("a")) {
				links[attr(a, "href")] = true
			}
			err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
				if err != nil || d.IsDir() {
					return err
				}
				rel, _ := filepath.Rel(root, p)
				if rel != FileName && !links[href(rel)] {
					t.Errorf("%s is not linked", rel)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}

			// The target and the lines on the time axis.
			if rows := find(doc, func(n *html.Node) bool { return n.Data == "text" && hasClass(n, "target") }); len(rows) != 1 || text(rows[0]) != "gateway" {
				t.Errorf("target rows %v", rows)
			}
			if marks := find(doc, func(n *html.Node) bool { return n.Data == "path" && hasClass(n, "fs") }); len(marks) < 9 {
				t.Errorf("%d failed-scrape marks, want the 9 failed scrapes on the timeline and on each chart", len(marks))
			}

			shot := filepath.Join(t.TempDir(), "report-"+strings.ToLower(c.verdict)+".png")
			runChromium(t, bin, "--hide-scrollbars", "--screenshot="+shot, "--window-size=1400,2400", "file://"+page)
			data, err := os.ReadFile(shot)
			if err != nil {
				t.Fatal(err)
			}
			img, err := png.Decode(bytes.NewReader(data))
			if err != nil || img.Bounds().Dx() != 1400 {
				t.Fatalf("screenshot: %v %v", err, img)
			}
			keep(t, shot)
		})
	}
}

// The 40-minute run with 8 instances and 1,200 scrapes opens in a browser
// with its script run, and stays small enough to be usable.
func TestReportLongRunInChromium(t *testing.T) {
	bin := chromium(t)
	root := longFixture(t)
	r, err := runview.Load(root)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := Write(&buf, r); err != nil {
		t.Fatal(err)
	}
	page := filepath.Join(t.TempDir(), FileName)
	if err := os.WriteFile(page, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	dom, _ := runChromium(t, bin, "--dump-dom", "file://"+page+"#t=600-900")
	doc, err := html.Parse(strings.NewReader(dom))
	if err != nil {
		t.Fatal(err)
	}
	if body := find(doc, tag("body")); len(body) != 1 || attr(body[0], "data-rendered") != "1" {
		t.Fatal("the script did not run to its end")
	}
	if got := find(doc, func(n *html.Node) bool { return attr(n, "id") == "range" }); len(got) != 1 || text(got[0]) != "10:00.0 – 15:00.0 (300.0 s)" {
		t.Errorf("range %v", got)
	}
	// The charts beyond the focus families are behind one disclosure.
	if more := find(doc, func(n *html.Node) bool { return attr(n, "id") == "more-metrics" }); len(more) != 1 || !strings.Contains(text(more[0]), "28 more metric families") {
		t.Errorf("more metrics: %v", more)
	}
	if rows := find(doc, func(n *html.Node) bool {
		return n.Data == "tr" && n.Parent != nil && n.Parent.Parent != nil && attr(n.Parent.Parent, "id") == "steady-table"
	}); len(rows) == 0 {
		t.Error("no before/after summary of the focus metrics")
	}
}

// The filter of the lines: report.html?filter=WORD opens narrowed, the
// list and the strokes on the timeline alike.
func TestReportLineFilterInChromium(t *testing.T) {
	bin := chromium(t)
	root := variantRun(t, "FAIL")
	r, err := runview.Load(root)
	if err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(r); err != nil {
		t.Fatal(err)
	}
	dom, _ := runChromium(t, bin, "--dump-dom", "file://"+filepath.Join(root, FileName)+"?filter=signal")
	doc, err := html.Parse(strings.NewReader(dom))
	if err != nil {
		t.Fatal(err)
	}
	shown, hidden := 0, 0
	for _, tr := range find(doc, func(n *html.Node) bool {
		return n.Data == "tr" && n.Parent != nil && n.Parent.Data == "tbody" && attr(n.Parent.Parent, "id") == "line-table"
	}) {
		if strings.Contains(attr(tr, "style"), "display: none") {
			hidden++
		} else {
			shown++
			if !strings.Contains(text(tr), "signal") {
				t.Errorf("a row that does not match is shown: %s", text(tr))
			}
		}
	}
	if shown != 1 || hidden != 10 {
		t.Errorf("%d rows shown, %d hidden; want 1 and 10", shown, hidden)
	}
	off := find(doc, func(n *html.Node) bool { return n.Data == "path" && hasClass(n, "lm") && hasClass(n, "off") })
	if len(off) != 10 {
		t.Errorf("%d strokes dimmed, want 10", len(off))
	}
	if c := find(doc, func(n *html.Node) bool { return attr(n, "id") == "line-count" }); len(c) != 1 || text(c[0]) != "1 of 11 lines" {
		t.Errorf("count %v", c)
	}
}
