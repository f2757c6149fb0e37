// Package browsertest drives Chromium for the browser tests of the
// examples: one Chromium per test binary, started by the first test that
// needs it, and one isolated browser context per test, so that tests
// sharing the browser stay independent and may run in parallel.
package browsertest

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/mercurekit/mercure/storetest"
)

// Want is what the browser tests skip for want of, for [storetest.ReportSkips];
// .ci/run installs it, so CI always runs them.
var Want = storetest.Want{What: "Chromium", How: "install it (Debian package chromium-headless-shell, or chromium)"}

// Browser is a test binary's Chromium, with windows of Width × Height
// pixels. A start costs seconds, more than most browser tests take
// otherwise: the first call of [Browser.Start] or [Browser.Context]
// starts it, and the package's TestMain closes it with [Browser.Close].
type Browser struct {
	Width, Height int

	once   sync.Once
	ctx    context.Context
	cancel context.CancelFunc
	err    error
}

// Start starts the Chromium if no test did yet. It skips t with -short
// or when there is no Chromium, and fails it when Chromium does not
// start.
func (b *Browser) Start(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: a browser test costs seconds of CPU")
	}
	exe := find()
	if exe == "" {
		storetest.Skip(t, Want)
	}
	b.once.Do(func() {
		opts := append(chromedp.DefaultExecAllocatorOptions[:],
			chromedp.ExecPath(exe), chromedp.NoSandbox, chromedp.DisableGPU,
			chromedp.Flag("disable-quic", true), chromedp.WindowSize(b.Width, b.Height))
		alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
		ctx, cancel := chromedp.NewContext(alloc)
		b.ctx, b.cancel = ctx, func() { cancel(); cancelAlloc() }
		b.err = chromedp.Do(ctx)
	})
	if b.err != nil {
		t.Fatalf("starting Chromium: %v", b.err)
	}
}

// Context opens a browser context of t's own (incognito: no cookie, cache
// or storage shared with other tests) with one page, closed when t ends;
// its steps fail after timeout. It starts the Chromium as Start does.
func (b *Browser) Context(t *testing.T, timeout time.Duration) context.Context {
	t.Helper()
	b.Start(t)
	ctx, cancel := context.WithTimeout(b.ctx, timeout)
	t.Cleanup(cancel)
	ctx, cancelContext := chromedp.NewContext(ctx, chromedp.WithNewBrowserContext())
	t.Cleanup(cancelContext)
	return ctx
}

// Close closes the Chromium, if a test started it.
func (b *Browser) Close() {
	if b.cancel != nil {
		b.cancel()
	}
}

// find returns the path of a Chromium the tests can drive, or "": the
// headless shell first. The full browser draws its own interface in every
// window, headless or not (Chromium 156 renders an omnibox popup page for
// each browser context), which took two thirds of the CPU time of
// the debugger's browser test; the shell runs the same engine without it.
func find() string {
	for _, name := range []string{"chromium-headless-shell", "chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// Step is one action on a page.
type Step = chromedp.Action[chromedp.Void]

// WaitJS polls a JavaScript condition on the page every 20 ms, for
// storetest.Deadline at most (less than the tests' page contexts allow, so
// that a failure names the condition): polling on every animation frame
// (chromedp's default) has Chromium draw frames all along, which cost a
// third of the CPU time of the browser tests.
func WaitJS(cond string) Step {
	return func(ctx context.Context, t *chromedp.Target) (chromedp.Void, error) {
		_, err := chromedp.Poll[bool](cond, chromedp.WithPollingTimeout(storetest.Deadline), chromedp.WithPollingInterval(20*time.Millisecond))(ctx, t)
		if err != nil {
			err = fmt.Errorf("waiting for %s: %w", cond, err)
		}
		return chromedp.Void{}, err
	}
}

// Contains waits until the element matching sel shows text.
func Contains(sel, text string) Step {
	return WaitJS(`(document.querySelector(` + JSString(sel) + `)?.innerText || "").includes(` + JSString(text) + `)`)
}

// Script runs JavaScript statements on the page.
func Script(js string) Step {
	return func(ctx context.Context, t *chromedp.Target) (chromedp.Void, error) {
		_, err := chromedp.Evaluate[bool](`(() => {`+js+`; return true })()`)(ctx, t)
		return chromedp.Void{}, err
	}
}

// SetValue sets the value of the field whose id is id as a user typing in
// it would, its input and change events included.
func SetValue(id, value string) Step {
	return Script(`const e = document.getElementById(` + JSString(id) + `); e.value = ` + JSString(value) +
		`; e.dispatchEvent(new Event("input")); e.dispatchEvent(new Event("change"))`)
}

// JSString quotes s as a JavaScript string literal.
func JSString(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(s) + `"`
}
