package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/wardenhq/warden/httpapi/pngtext"
)

// The README shows a preview served through Caddy beside its environment
// page in the console. `make screenshots` draws it from a running
// `make previews` (TestP2P12P18MakePreviewsStartsThePlatformAndStopsIt, with
// WARDEN_DOCS_SCREENSHOTS=1); the picture carries the digest of what drew
// it, and a change to that makes the test below say it is stale.
const (
	previewShot      = "preview-on-caddy.png"
	previewDigestKey = "warden-preview"
)

// previewDigest: the console's layout, environment page and stylesheet,
// and the example application's page.
func previewDigest(t *testing.T) string {
	h := sha256.New()
	for _, f := range []string{"../../httpapi/console/templates/layout.html", "../../httpapi/console/templates/environment.html",
		"../../httpapi/console/static/console.css", "../../examples/previewapp/main.go"} {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// TestP3TheReadmeShowsAPreviewServedThroughCaddy: the picture is there,
// the previews guide shows it, and it was drawn from the current console
// and application.
func TestP3TheReadmeShowsAPreviewServedThroughCaddy(t *testing.T) {
	guide, err := os.ReadFile("../../docs/guides/previews.md")
	require.NoError(t, err)
	require.Contains(t, string(guide), "../"+previewShot)
	b, err := os.ReadFile(filepath.Join("../../docs", previewShot))
	require.NoError(t, err)
	got, ok := pngtext.Get(b, previewDigestKey)
	require.True(t, ok, "docs/%s was not made by `make screenshots`", previewShot)
	require.Equal(t, previewDigest(t), got, "docs/%s shows an older console or application: run `make screenshots`", previewShot)
}

// saveScreenshot draws, in Chromium, the console's page of env (signed in
// with token) and the preview through Caddy at previewURL, side by side,
// into docs/.
func saveScreenshot(t *testing.T, wardenURL, token, env, previewURL string) {
	if os.Getenv("WARDEN_DOCS_SCREENSHOTS") != "1" {
		return
	}
	browser, err := exec.LookPath("chromium")
	require.NoError(t, err, "make screenshots needs Chromium (Debian: chromium)")
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(browser), chromedp.NoSandbox,
		chromedp.Flag("disable-gpu", true), chromedp.WindowSize(900, 700))
	actx, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancel()
	ctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(wardenURL+"/"), chromedp.WaitVisible(chromedp.ID("token")),
		chromedp.SendKeys(chromedp.ID("token"), token), chromedp.Click(chromedp.ID("sign-in")), chromedp.WaitVisible(chromedp.ID("marquee-list")),
		chromedp.Navigate(wardenURL+"/ui/environments/"+env), chromedp.WaitVisible(chromedp.CSS("main"))))
	console, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	require.NoError(t, err)
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(previewURL), chromedp.WaitVisible(chromedp.CSS("h1"))))
	preview, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	require.NoError(t, err)
	out, err := besideEachOther(console, preview)
	require.NoError(t, err)
	out, err = pngtext.With(out, previewDigestKey, previewDigest(t))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join("../../docs", previewShot), out, 0o644))
}

// besideEachOther puts two screenshots side by side with a gap.
func besideEachOther(left, right []byte) ([]byte, error) {
	a, err := png.Decode(bytes.NewReader(left))
	if err != nil {
		return nil, err
	}
	b, err := png.Decode(bytes.NewReader(right))
	if err != nil {
		return nil, err
	}
	const gap = 16
	w, h := a.Bounds().Dx()+gap+b.Bounds().Dx(), max(a.Bounds().Dy(), b.Bounds().Dy())
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	draw.Draw(img, img.Bounds(), &image.Uniform{color.RGBA{0xdd, 0xdd, 0xdd, 0xff}}, image.Point{}, draw.Src)
	draw.Draw(img, a.Bounds(), a, a.Bounds().Min, draw.Src)
	draw.Draw(img, b.Bounds().Add(image.Pt(a.Bounds().Dx()+gap, 0)), b, b.Bounds().Min, draw.Src)
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
