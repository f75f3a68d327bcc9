package httpapi_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"hash/crc32"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/wardenhq/warden/httpapi"
)

// The README shows two of the browser test's screenshots, copied to docs/
// by `make screenshots`. A picture cannot be compared with the console it
// should show, so each copy carries, in a PNG text chunk, a digest of the
// templates and stylesheet it was drawn from; a change to them makes the
// copy stale and this test say so (issue 22: the README's screenshot
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

// withTextChunk returns png with a tEXt chunk key=value after its header.
func withTextChunk(png []byte, key, value string) ([]byte, error) {
	const headerEnd = 8 + 4 + 4 + 13 + 4 // signature, IHDR length, type, data, CRC
	if len(png) < headerEnd || string(png[12:16]) != "IHDR" {
		return nil, errors.New("not a PNG with its IHDR first")
	}
	data := append([]byte(key+"\x00"), value...)
	chunk := binary.BigEndian.AppendUint32(nil, uint32(len(data)))
	chunk = append(chunk, "tEXt"...)
	chunk = append(chunk, data...)
	chunk = binary.BigEndian.AppendUint32(chunk, crc32.ChecksumIEEE(chunk[4:]))
	out := append([]byte{}, png[:headerEnd]...)
	out = append(out, chunk...)
	return append(out, png[headerEnd:]...), nil
}

// textChunk finds key's tEXt value in png.
func textChunk(png []byte, key string) (string, bool) {
	for i := 8; i+12 <= len(png); {
		n := int(binary.BigEndian.Uint32(png[i:]))
		if i+12+n > len(png) {
			break
		}
		if string(png[i+4:i+8]) == "tEXt" {
			if k, v, ok := bytes.Cut(png[i+8:i+8+n], []byte{0}); ok && string(k) == key {
				return string(v), true
			}
		}
		i += 12 + n
	}
	return "", false
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
		png, err = withTextChunk(png, consoleDigestKey, consoleDigest(t, s.shot))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join("..", "docs", s.doc), png, 0o644))
	}
}

func TestIssue22TheReadmeScreenshotsShowTheCurrentConsole(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "README.md"))
	require.NoError(t, err)
	for _, s := range docsScreenshots {
		require.Contains(t, string(readme), "docs/"+s.doc, "the README shows it")
		png, err := os.ReadFile(filepath.Join("..", "docs", s.doc))
		require.NoError(t, err)
		got, ok := textChunk(png, consoleDigestKey)
		require.True(t, ok, "docs/%s was not made by `make screenshots`", s.doc)
		require.Equal(t, consoleDigest(t, s.shot), got,
			"docs/%s shows an older console (its templates or stylesheet changed since): run `make screenshots`", s.doc)
	}
}

func TestTextChunkRoundTrips(t *testing.T) {
	png, err := os.ReadFile(filepath.Join("..", "docs", "console-marquees.png"))
	require.NoError(t, err)
	out, err := withTextChunk(png, "k", "v")
	require.NoError(t, err)
	v, ok := textChunk(out, "k")
	require.True(t, ok)
	require.Equal(t, "v", v)
	_, err = withTextChunk([]byte("not a png"), "k", "v")
	require.Error(t, err)
}
