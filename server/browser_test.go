package server

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

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
		s, err := chromedp.Run(browser, chromedp.Text(chromedp.CSS(sel)))
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
	shot("console-queue.png")
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
	shot("console-run.png")
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
