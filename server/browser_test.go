package server

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/belayrun/belay"
	"github.com/belayrun/belay/examples/support"
	"github.com/belayrun/belay/store"
)

// chromium finds a headless-capable Chromium. Under CI its absence fails
// the test: .ci/run installs it.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("no Chromium on PATH; .ci/run installs it with apt-get install -y chromium")
	}
	t.Skip("SKIPPED: no Chromium on PATH (apt-get install -y chromium); the console's browser test did not run")
	return ""
}

// artifacts is where the browser test leaves its screenshots:
// $BELAY_ARTIFACTS, or artifacts/ at the top of the repository.
func artifacts(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("BELAY_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join("..", "artifacts")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestConsoleApprovesInBrowser signs in to the console in headless
// Chromium, finds the pending refund's card, approves it with one click and
// watches the run finish on its page, which updates by itself.
func TestConsoleApprovesInBrowser(t *testing.T) {
	bin := chromium(t)
	f := newFixture(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := f.rt.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer f.rt.Stop(context.Background())
	op := f.key("acme", "ops", store.RoleOperator)
	approver := f.key("acme", "maya@example.com", store.RoleApprover)
	run := f.start(op, "T-1001", "support", "ada", demoInput)
	waitCtx, cancelWait := context.WithTimeout(ctx, 30*time.Second)
	defer cancelWait()
	if got, err := f.rt.Wait(waitCtx, "acme", run.ID); err != nil || got.Status != store.StatusWaitingApproval {
		t.Fatalf("run %s before the browser: %v", got.Status, err)
	}

	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(bin), chromedp.NoSandbox, chromedp.DisableGPU, chromedp.WindowSize(1280, 1000))
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	defer cancelAlloc()
	browser, cancelBrowser := chromedp.NewContext(allocCtx)
	defer cancelBrowser()
	browser, cancelTimeout := context.WithTimeout(browser, 90*time.Second)
	defer cancelTimeout()

	dir := artifacts(t)
	shot := func(name string) {
		if png, err := chromedp.Run(browser, chromedp.FullScreenshot(100)); err == nil {
			_ = os.WriteFile(filepath.Join(dir, name), png, 0o644)
		}
	}
	step := func(what string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(browser, actions...); err != nil {
			shot("failed.png")
			t.Fatalf("browser: %s: %v", what, err)
		}
	}
	text := func(sel string) string {
		t.Helper()
		// Read in one script rather than by node: the run page redraws as
		// its events arrive, and a node found a moment before may be gone.
		s, err := chromedp.Run(browser, chromedp.Evaluate[string](fmt.Sprintf(`(document.querySelector(%q) || {}).innerText || ""`, sel)))
		if err != nil {
			t.Fatalf("browser: text of %s: %v", sel, err)
		}
		return s
	}

	// Not signed in: the console sends the browser to sign in.
	step("sign in", chromedp.Navigate(f.http.URL+"/console/"),
		chromedp.WaitVisible(chromedp.CSS(`input[name="key"]`)),
		chromedp.SendKeys(chromedp.CSS(`input[name="key"]`), approver),
		chromedp.Click(chromedp.CSS(`.login button`)),
		chromedp.WaitVisible(chromedp.CSS(`article.card`)))
	cardText := text(`article.card`)
	// One click; the run page shows the decision, then the run moving on
	// to done without a reload.
	step("approve", chromedp.Click(chromedp.CSS(`button[data-action="approve"]`)),
		chromedp.WaitVisible(chromedp.CSS(`.flash`)),
		chromedp.WaitVisible(chromedp.CSS(`#run-status .st-done`)))
	status := text(`#run-status`)
	url, err := chromedp.Run(browser, chromedp.Location())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(cardText, "Refund 288.00 USD on invoice INV-2026-004512") || !strings.Contains(cardText, "288") {
		t.Errorf("the card does not show the refund and its amount:\n%s", cardText)
	}
	if !strings.Contains(url, "/console/runs/"+run.ID) || strings.TrimSpace(status) != "done" {
		t.Errorf("after approving: at %s, status %q", url, status)
	}
	got, err := f.st.GetRun(context.Background(), "acme", run.ID)
	if err != nil || got.Status != store.StatusDone {
		t.Fatalf("run %s: %v", got.Status, err)
	}
	as, _ := f.st.Approvals(context.Background(), store.ListApprovalsParams{RunID: run.ID})
	if len(as) != 1 || as[0].Status != store.ApprovalApproved || as[0].DecidedBy != "human:maya@example.com" {
		t.Errorf("approvals %+v", as)
	}
	refunds, err := f.world.RefundsOf(context.Background(), "CH-2")
	if err != nil || len(refunds) != 1 {
		t.Errorf("refunds of CH-2: %+v, %v", refunds, err)
	}
	t.Logf("screenshots in %s", dir)
}

// consoleStory is the console's data in the screenshots: ada's refund,
// done; weeks of other customers' tickets, decided by people and by a
// policy; a run its turn limit paused after it refunded; and ada asking
// again, so that a second refund of her charge waits for a person.
type consoleStory struct {
	done, paused runView
	repeat       approvalView
}

func (f *fixture) consoleStory(op, approver string, now time.Time) consoleStory {
	f.t.Helper()
	ctx := context.Background()
	var s consoleStory
	s.done = f.start(op, "T-1001", "support", "ada", demoInput)
	f.drain()
	f.approveRun(approver, s.done.ID)

	if err := f.world.SeedTickets(ctx, 12); err != nil {
		f.t.Fatal(err)
	}
	// The trend needs decisions over weeks. They are recorded through the
	// store at the times they are said to have been taken, as a runtime
	// would have recorded them then. Every third ticket's refund is small
	// enough to need no one.
	history := []struct {
		ticket  int // TicketSeed's; -1 for a vault run
		user    string
		daysAgo int
		status  store.ApprovalStatus
		by      string
	}{
		{1, "bob", 33, store.ApprovalApproved, "human:maya@example.com"},
		{2, "chen", 31, store.ApprovalRejected, "human:lee@example.com"},
		{-1, "dara", 30, store.ApprovalApproved, "human:lee@example.com"},
		{3, "emil", 0, "", ""},
		{4, "fay", 23, store.ApprovalEdited, "human:maya@example.com"},
		{5, "gus", 17, store.ApprovalApproved, "policy:demo-auto"},
		{-1, "hana", 16, store.ApprovalRejected, "human:maya@example.com"},
		{7, "ivo", 10, store.ApprovalApproved, "human:lee@example.com"},
		{8, "jun", 9, store.ApprovalApproved, "human:maya@example.com"},
		{-1, "kai", 3, store.ApprovalApproved, "human:maya@example.com"},
		{10, "lin", 2, store.ApprovalApproved, "human:lee@example.com"},
		{11, "mo", 1, store.ApprovalExpired, store.ExpiryDecider},
	}
	for i, h := range history {
		agent, ticket, input := "vault", fmt.Sprintf("V-%d", 300+i), "Please store my API token for the billing export."
		if h.ticket >= 0 {
			t := support.TicketSeed(h.ticket)
			agent, ticket, input = "support", t.ID, t.Input()
		}
		run := f.start(op, ticket, agent, h.user, input)
		f.drain()
		if h.status == "" {
			continue
		}
		as, err := f.st.Approvals(ctx, store.ListApprovalsParams{Tenant: "acme", RunID: run.ID})
		if err != nil || len(as) != 1 {
			f.t.Fatalf("run %s: approvals %v, %v", run.ID, as, err)
		}
		a := as[0]
		p := store.DecideParams{Tenant: "acme", ID: a.ID, Binding: a.Binding, Status: h.status, By: h.by,
			Now: now.AddDate(0, 0, -h.daysAgo)}
		if h.status == store.ApprovalEdited {
			p.EditedArgs, p.EditedHash = a.Args, a.ArgsHash
		}
		if _, err := f.st.DecideApproval(ctx, p); err != nil {
			f.t.Fatalf("decide %s: %v", a.ID, err)
		}
	}
	f.drain()

	// Six turns get the run through its refund and its note, not its reply.
	t := support.TicketSeed(0)
	paused, _, err := f.rt.StartRun(ctx, belay.RunRequest{Agent: "support", Tenant: "acme", User: "nia", ClientRequestID: t.ID,
		Input: t.Input(), Budget: belay.Budget{MaxTurns: 6}, RequestedBy: "human:ops"})
	if err != nil {
		f.t.Fatal(err)
	}
	f.drain()
	s.paused = runView{ID: paused.ID}
	if got, err := f.st.GetRun(ctx, "acme", paused.ID); err != nil || got.Status != store.StatusPaused {
		f.t.Fatalf("the run with six turns: %s, %v; want it paused", got.Status, err)
	}

	again := f.start(op, "T-1002", "support", "ada", demoInput)
	f.drain()
	for _, a := range f.pending(approver) {
		if a.RunID == again.ID {
			s.repeat = a
		}
	}
	if s.repeat.ID == "" {
		f.t.Fatal("ada's second run asks for no approval")
	}
	return s
}

// viewports are the widths every console page is checked and shown at: a
// desktop's and a phone's.
var viewports = []struct {
	suffix        string
	width, height int64
}{{"", 1280, 900}, {"-phone", 390, 844}}

// overflow is what the browser measures of a page: its width, the
// viewport's, and the elements that reach past the viewport.
type overflow struct {
	Scroll int      `json:"scroll"`
	Inner  int      `json:"inner"`
	Wide   []string `json:"wide"`
}

const measureOverflow = `(() => {
  const inner = window.innerWidth, wide = [];
  for (const el of document.querySelectorAll("body *")) {
    const r = el.getBoundingClientRect();
    if (r.width > 0 && r.right > inner + 0.5) wide.push(el.tagName.toLowerCase() + (el.getAttribute("class") ? "." + el.getAttribute("class") : "") + " to " + Math.round(r.right));
  }
  return {scroll: document.documentElement.scrollWidth, inner: inner, wide: wide.slice(0, 12)};
})()`

// TestConsolePagesFitAndShow opens every console page in headless Chromium
// at a desktop's width and a phone's: none may be wider than the window (no
// sideways scrolling), and each is captured. With BELAY_SCREENSHOTS=1 the
// captures are written to docs/console-*.png, the README's pictures;
// otherwise to the artifacts directory, so that a test run never rewrites
// committed files.
func TestConsolePagesFitAndShow(t *testing.T) {
	bin := chromium(t)
	f := newFixture(t)
	op := f.key("acme", "ops", store.RoleOperator)
	approver := f.key("acme", "maya@example.com", store.RoleApprover)
	story := f.consoleStory(op, approver, time.Now())

	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(bin), chromedp.NoSandbox, chromedp.DisableGPU, chromedp.WindowSize(1280, 900))
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelAlloc()
	browser, cancelBrowser := chromedp.NewContext(allocCtx)
	defer cancelBrowser()
	browser, cancelTimeout := context.WithTimeout(browser, 3*time.Minute)
	defer cancelTimeout()

	// The pictures for docs/ are re-encoded small; those left as artifacts
	// are kept as taken, which is quicker (the race detector slows the
	// re-encoding down many times).
	dir, docs := artifacts(t), os.Getenv("BELAY_SCREENSHOTS") == "1"
	if docs {
		dir = filepath.Join("..", "docs")
	}
	do := func(what string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(browser, actions...); err != nil {
			t.Fatalf("browser: %s: %v", what, err)
		}
	}
	// show opens a page at each width, waits for what it must show, checks
	// that it fits and captures it as console-<name>.png.
	show := func(name, path, ready string) {
		t.Helper()
		for _, v := range viewports {
			do(name+v.suffix, chromedp.EmulateViewport(v.width, v.height),
				chromedp.Navigate(f.http.URL+path), chromedp.WaitVisible(chromedp.CSS(ready)))
			got, err := chromedp.Run(browser, chromedp.Evaluate[overflow](measureOverflow))
			if err != nil {
				t.Fatalf("measure %s: %v", name, err)
			}
			if got.Scroll > got.Inner {
				t.Errorf("%s at %d px is %d px wide: it scrolls sideways; past the edge: %v", path, v.width, got.Scroll, got.Wide)
			}
			shot, err := chromedp.Run(browser, chromedp.FullScreenshot(100))
			if err != nil {
				t.Fatalf("capture %s: %v", name, err)
			}
			if docs {
				if shot, err = smallPNG(shot); err != nil {
					t.Fatalf("capture %s: %v", name, err)
				}
			}
			if err := os.WriteFile(filepath.Join(dir, "console-"+name+v.suffix+".png"), shot, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}

	show("login", "/console/login", `input[name="key"]`)
	do("sign in", chromedp.EmulateViewport(1280, 900), chromedp.Navigate(f.http.URL+"/console/login"),
		chromedp.WaitVisible(chromedp.CSS(`input[name="key"]`)),
		chromedp.SendKeys(chromedp.CSS(`input[name="key"]`), approver),
		chromedp.Click(chromedp.CSS(`.login button`)),
		chromedp.WaitVisible(chromedp.CSS(`article.card`)))
	show("queue", "/console/", `article.card .repeat`)
	show("approval", "/console/approvals/"+story.repeat.ID, `article.card .repeat`)
	show("stats", "/console/stats", `.trend-chart svg`)
	show("status", "/console/approvals/ap_does_not_exist", `main h1`)

	show("run", "/console/runs/"+story.paused.ID, `#packet .side-effects`)
	show("runs", "/console/runs", `table.runs`)
}

// smallPNG re-encodes a screenshot in 256 colours, which a page of flat
// colours and text needs, at a third of the size or less: the pictures are
// kept in git. The palette is the most used colours, counted in buckets of
// 4 bits a channel so that the shades of anti-aliased text share a few
// entries and a rare hue (a badge's text) keeps one of its own; each entry
// is its bucket's mean.
func smallPNG(shot []byte) ([]byte, error) {
	img, err := png.Decode(bytes.NewReader(shot))
	if err != nil {
		return nil, err
	}
	type bucket struct{ r, g, b, n int }
	buckets := map[uint32]*bucket{}
	rect := img.Bounds()
	for y := rect.Min.Y; y < rect.Max.Y; y++ {
		for x := rect.Min.X; x < rect.Max.X; x++ {
			r, g, b, _ := img.At(x, y).RGBA()
			k := r>>12<<8 | g>>12<<4 | b>>12
			s := buckets[k]
			if s == nil {
				s = &bucket{}
				buckets[k] = s
			}
			s.r, s.g, s.b, s.n = s.r+int(r>>8), s.g+int(g>>8), s.b+int(b>>8), s.n+1
		}
	}
	used := slices.SortedFunc(maps.Values(buckets), func(a, b *bucket) int { return cmp.Compare(b.n, a.n) })
	palette := make(color.Palette, 0, 256)
	for _, s := range used[:min(len(used), 256)] {
		palette = append(palette, color.RGBA{uint8(s.r / s.n), uint8(s.g / s.n), uint8(s.b / s.n), 255})
	}
	out := image.NewPaletted(rect, palette)
	nearest := map[color.RGBA]uint8{}
	for y := rect.Min.Y; y < rect.Max.Y; y++ {
		for x := rect.Min.X; x < rect.Max.X; x++ {
			r, g, b, _ := img.At(x, y).RGBA()
			c := color.RGBA{uint8(r >> 8), uint8(g >> 8), uint8(b >> 8), 255}
			i, ok := nearest[c]
			if !ok {
				i = uint8(palette.Index(c))
				nearest[c] = i
			}
			out.SetColorIndex(x, y, i)
		}
	}
	var buf bytes.Buffer
	err = (&png.Encoder{CompressionLevel: png.BestCompression}).Encode(&buf, out)
	return buf.Bytes(), err
}
