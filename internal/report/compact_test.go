package report

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/net/html"

	"github.com/chaos-harness/chaos/internal/rundir/bigrun"
	"github.com/chaos-harness/chaos/internal/runview"
)

// compactRun is a run with more bars than compactBars: 6 instances and
// 1,200 operation applications.
func compactRun(t *testing.T) []byte {
	t.Helper()
	root, err := bigrun.Write(t.TempDir(), bigrun.Size{Instances: 6, Applications: 1200, Scrapes: 20, Span: 60})
	if err != nil {
		t.Fatal(err)
	}
	r, err := runview.Load(root)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := Write(&buf, r); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// Above compactBars, the bars are paths, one per row, class and colour,
// and every bar has its interval and label in the script's JSON.
func TestTimelineCompactBars(t *testing.T) {
	page := compactRun(t)
	doc, err := html.Parse(bytes.NewReader(page))
	if err != nil {
		t.Fatal(err)
	}
	tl := find(doc, func(n *html.Node) bool { return n.Data == "svg" && attr(n, "id") == "timeline" })
	if len(tl) != 1 {
		t.Fatalf("%d timelines", len(tl))
	}
	if rects := find(tl[0], func(n *html.Node) bool { return n.Data == "rect" && (hasClass(n, "st") || hasClass(n, "op")) }); len(rects) != 0 {
		t.Errorf("%d bars drawn as <rect>, want none", len(rects))
	}
	bars, fills := 0, map[string]bool{}
	for _, p := range find(tl[0], func(n *html.Node) bool { return n.Data == "path" && hasClass(n, "bb") }) {
		bars += strings.Count(attr(p, "d"), "M")
		fills[strings.SplitN(strings.TrimPrefix(attr(p, "style"), "fill:"), ";", 2)[0]] = true
	}
	for _, c := range []string{colRunning, colRed, colNode} {
		if !fills[c] {
			t.Errorf("no bar coloured %s: %v", c, fills)
		}
	}
	script := find(doc, func(n *html.Node) bool { return n.Data == "script" && attr(n, "id") == "timeline-tips" })
	if len(script) != 1 || script[0].FirstChild == nil {
		t.Fatal("no tooltips for the bars")
	}
	var tips tipData
	if err := json.Unmarshal([]byte(script[0].FirstChild.Data), &tips); err != nil {
		t.Fatal(err)
	}
	n, ops := 0, 0
	for _, row := range tips.R {
		for i, iv := range row.I {
			n++
			if len(iv) < 3 || int(iv[2]) >= len(tips.L) || iv[1] < iv[0] || (i > 0 && iv[0] < row.I[i-1][0]) {
				t.Fatalf("row %d: interval %v", row.Y, iv)
			}
			if len(iv) == 4 {
				ops++
				if !strings.Contains(tips.L[int(iv[2])], runMark) {
					t.Errorf("operation label %q has no place for its run", tips.L[int(iv[2])])
				}
			}
		}
	}
	if n != bars || n <= compactBars {
		t.Errorf("%d bars drawn, %d intervals; want the same, above %d", bars, n, compactBars)
	}
	if ops != 1200 {
		t.Errorf("%d operation intervals, want 1200", ops)
	}
	if len(tips.L) >= n/2 {
		t.Errorf("%d labels for %d bars: labels are not shared", len(tips.L), n)
	}
}

// In a browser, the pointer over a bar drawn as a path shows its tooltip:
// a script added to the page moves a mouse over the first operation bar
// and over an instance's bar, after zooming in, and writes what the
// tooltip said.
func TestTimelineCompactTooltipInChromium(t *testing.T) {
	bin := chromium(t)
	page := string(compactRun(t))
	probe := `<script>
(function () {
  var tl = document.getElementById("timeline"), TD = JSON.parse(document.getElementById("timeline-tips").textContent);
  var L = +document.body.getAttribute("data-l"), P = +document.body.getAttribute("data-p"), W = +document.body.getAttribute("data-w");
  var END = +document.body.getAttribute("data-end"), VH = tl.viewBox.baseVal.height, out = [];
  function over(row, iv, a, b) {
    // A first move shows the time in the toolbar, which may move the
    // timeline down: the second is where the bar then is.
    var r0 = tl.getBoundingClientRect();
    tl.dispatchEvent(new MouseEvent("mousemove", { bubbles: true, clientX: r0.left + r0.width / 2, clientY: r0.top + 1 }));
    var r = tl.getBoundingClientRect(), t = (iv[0] + iv[1]) / 2, x = L + (t - a) / (b - a) * P, y = row.y + 10;
    tl.dispatchEvent(new MouseEvent("mousemove", { bubbles: true, clientX: r.left + x * r.width / W, clientY: r.top + y * r.height / VH }));
    var tip = document.getElementById("tip");
    out.push(tip.style.display === "block" ? tip.textContent : "(none)");
  }
  var op = null, st = null;
  TD.r.forEach(function (row) {
    if (!op && row.i[0].length === 4) op = row;
    if (row.i.length > 50 && row.i[0].length === 3) st = row;
  });
  over(op, op.i[0], 0, END);
  var iv = st.i[40];
  location.hash = "#t=" + iv[0] + "-" + (iv[0] + 2);
  window.dispatchEvent(new HashChangeEvent("hashchange"));
  over(st, iv, iv[0], iv[0] + 2);
  document.body.setAttribute("data-tips", out.join("\n"));
})();
</script>
</body>`
	page = strings.Replace(page, "</body>", probe, 1)
	file := filepath.Join(t.TempDir(), FileName)
	if err := os.WriteFile(file, []byte(page), 0o644); err != nil {
		t.Fatal(err)
	}
	dom, _ := runChromium(t, bin, "--window-size=1400,1000", "--dump-dom", "file://"+file)
	doc, err := html.Parse(strings.NewReader(dom))
	if err != nil {
		t.Fatal(err)
	}
	body := find(doc, tag("body"))
	if len(body) != 1 || attr(body[0], "data-rendered") != "1" {
		t.Fatal("the page's script did not run to its end")
	}
	got := strings.Split(attr(body[0], "data-tips"), "\n")
	if len(got) != 2 {
		t.Fatalf("tooltips %q", got)
	}
	if !strings.HasPrefix(got[0], "restart run 1 (restart-in-place) on ") || !strings.Contains(got[0], " s → ") || !strings.Contains(got[0], " UTC") {
		t.Errorf("tooltip of the first operation bar: %q", got[0])
	}
	if !strings.HasPrefix(got[1], "counter-") || !strings.Contains(got[1], " · ") || !strings.Contains(got[1], " s → ") {
		t.Errorf("tooltip of an instance's bar, zoomed in: %q", got[1])
	}
	t.Logf("tooltips: %q", got)
}
