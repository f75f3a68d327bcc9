package httpapi_test

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/wardenhq/warden/httpapi"
	"github.com/wardenhq/warden/httpapi/pngtext"
)

// The README shows two of the browser test's screenshots, copied to docs/
// by `make screenshots`. A picture cannot be compared with the console it
// should show, so each copy carries, in a PNG text chunk, a digest of the
// templates and stylesheet it was drawn from; a change to them makes the
// copy stale and this test say so (the README's screenshot
// predated the Cluster page).

// docsScreenshots maps each README picture to the browser test's shot and
// the templates that draw it.
var docsScreenshots = []struct{ doc, shot string }{
	{"console-marquees.png", "marquees"},
	{"console-marquee.png", "marquee"},
}

const consoleDigestKey = "warden-console"

// consoleDigest is the digest of what draws page: the layout (its
// navigation), the page's template and the stylesheet.
func consoleDigest(t *testing.T, page string) string {
	h := sha256.New()
	for _, name := range []string{"console/templates/layout.html", "console/templates/" + page + ".html", "console/static/console.css"} {
		b, err := httpapi.ConsoleFS.ReadFile(name)
		require.NoError(t, err)
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// saveDocsScreenshots copies the shots the README shows into docs/ with
// their digests, when `make screenshots` asks (WARDEN_DOCS_SCREENSHOTS=1).
func saveDocsScreenshots(t *testing.T, shots string) {
	if os.Getenv("WARDEN_DOCS_SCREENSHOTS") != "1" {
		return
	}
	for _, s := range docsScreenshots {
		png, err := os.ReadFile(filepath.Join(shots, s.shot+".png"))
		require.NoError(t, err)
		png, err = pngtext.With(png, consoleDigestKey, consoleDigest(t, s.shot))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join("..", "docs", s.doc), png, 0o644))
	}
}

func TestTheReadmeScreenshotsShowTheCurrentConsole(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "README.md"))
	require.NoError(t, err)
	for _, s := range docsScreenshots {
		require.Contains(t, string(readme), "docs/"+s.doc, "the README shows it")
		png, err := os.ReadFile(filepath.Join("..", "docs", s.doc))
		require.NoError(t, err)
		got, ok := pngtext.Get(png, consoleDigestKey)
		require.True(t, ok, "docs/%s was not made by `make screenshots`", s.doc)
		require.Equal(t, consoleDigest(t, s.shot), got,
			"docs/%s shows an older console (its templates or stylesheet changed since): run `make screenshots`", s.doc)
	}
}

func TestTextChunkRoundTrips(t *testing.T) {
	png, err := os.ReadFile(filepath.Join("..", "docs", "console-marquees.png"))
	require.NoError(t, err)
	out, err := pngtext.With(png, "k", "v")
	require.NoError(t, err)
	v, ok := pngtext.Get(out, "k")
	require.True(t, ok)
	require.Equal(t, "v", v)
	_, err = pngtext.With([]byte("not a png"), "k", "v")
	require.Error(t, err)
}
