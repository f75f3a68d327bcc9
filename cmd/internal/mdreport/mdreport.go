// Package mdreport keeps BENCHMARKS.md up to date: each tool owns sections
// (from a "## " heading to the next one) and replaces only those, so figures
// from different commands live side by side.
package mdreport

import (
	"os"
	"strings"
)

// Preamble starts a new report file.
const Preamble = "# Benchmarks\n\nFigures are measured, with the command that produced them. Ratios compare against a baseline measured in the same run.\n\n"

// Replace writes section in place of the one starting with heading (a line
// "## ..."), or appends it when the file has none.
func Replace(path, heading, section string) error {
	old, _ := os.ReadFile(path)
	text := string(old)
	section = strings.TrimRight(section, "\n") + "\n\n" // one blank line between sections
	if i := strings.Index(text, heading+"\n"); i >= 0 {
		rest := text[i+len(heading):]
		end := len(text)
		if j := strings.Index(rest, "\n## "); j >= 0 {
			end = i + len(heading) + j + 1
		}
		text = text[:i] + section + text[end:]
	} else {
		if text == "" {
			text = Preamble
		}
		text = strings.TrimRight(text, "\n") + "\n\n" + section
	}
	return os.WriteFile(path, []byte(text), 0o644)
}
