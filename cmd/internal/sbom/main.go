// Command sbom writes the software bill of materials of Go binaries
// (D3): an SPDX 2.3 JSON document listing each binary and every module
// linked into it, with its version and checksum, read from the build
// information Go embeds. Its only timestamp is the one given (make dist
// gives the commit's), so two runs over one build are byte-identical.
//
//	go run ./cmd/internal/sbom -created 2026-12-01T00:00:00Z -name warden-v1 bin...
package main

import (
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

type doc struct {
	SPDXVersion       string         `json:"spdxVersion"`
	DataLicense       string         `json:"dataLicense"`
	SPDXID            string         `json:"SPDXID"`
	Name              string         `json:"name"`
	DocumentNamespace string         `json:"documentNamespace"`
	CreationInfo      creation       `json:"creationInfo"`
	Packages          []pkg          `json:"packages"`
	Relationships     []relationship `json:"relationships"`
}

type creation struct {
	Created  string   `json:"created"`
	Creators []string `json:"creators"`
}

type pkg struct {
	Name             string     `json:"name"`
	SPDXID           string     `json:"SPDXID"`
	VersionInfo      string     `json:"versionInfo"`
	DownloadLocation string     `json:"downloadLocation"`
	FilesAnalyzed    bool       `json:"filesAnalyzed"`
	Checksums        []checksum `json:"checksums,omitempty"`
	ExternalRefs     []ref      `json:"externalRefs,omitempty"`
}

type checksum struct {
	Algorithm string `json:"algorithm"`
	Value     string `json:"checksumValue"`
}

type ref struct {
	Category string `json:"referenceCategory"`
	Type     string `json:"referenceType"`
	Locator  string `json:"referenceLocator"`
}

type relationship struct {
	From string `json:"spdxElementId"`
	Type string `json:"relationshipType"`
	To   string `json:"relatedSpdxElement"`
}

func main() {
	created := flag.String("created", "", "the document's creation time (RFC 3339): the commit's, for a reproducible file")
	name := flag.String("name", "warden", "the document's name")
	flag.Parse()
	if *created == "" || flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: sbom -created TIME [-name NAME] BINARY...")
		os.Exit(2)
	}
	d, err := build(*name, *created, flag.Args())
	if err != nil {
		fmt.Fprintln(os.Stderr, "sbom:", err)
		os.Exit(1)
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(d); err != nil {
		os.Exit(1)
	}
}

func build(name, created string, bins []string) (doc, error) {
	d := doc{SPDXVersion: "SPDX-2.3", DataLicense: "CC0-1.0", SPDXID: "SPDXRef-DOCUMENT", Name: name,
		DocumentNamespace: "https://github.com/wardenhq/warden/sbom/" + name,
		CreationInfo:      creation{Created: created, Creators: []string{"Tool: warden cmd/internal/sbom"}}}
	modules := map[string]pkg{}
	for _, bin := range bins {
		info, err := buildinfo.ReadFile(bin)
		if err != nil {
			return d, fmt.Errorf("%s: %w", bin, err)
		}
		sum, err := fileSHA256(bin)
		if err != nil {
			return d, err
		}
		id := "SPDXRef-Binary-" + spdxID(filepath.Base(bin))
		d.Packages = append(d.Packages, pkg{Name: filepath.Base(bin), SPDXID: id, VersionInfo: info.Main.Version,
			DownloadLocation: "NOASSERTION", Checksums: []checksum{{"SHA256", sum}}})
		d.Relationships = append(d.Relationships, relationship{"SPDXRef-DOCUMENT", "DESCRIBES", id})
		d.Relationships = append(d.Relationships, relationship{id, "DEPENDS_ON", "SPDXRef-Package-go-stdlib-" + spdxID(info.GoVersion)})
		modules["stdlib@"+info.GoVersion] = pkg{Name: "stdlib", SPDXID: "SPDXRef-Package-go-stdlib-" + spdxID(info.GoVersion), VersionInfo: info.GoVersion,
			DownloadLocation: "https://go.dev/dl/", ExternalRefs: []ref{{"PACKAGE-MANAGER", "purl", "pkg:golang/stdlib@" + info.GoVersion}}}
		for _, m := range info.Deps {
			if m.Replace != nil {
				m = m.Replace
			}
			mid := "SPDXRef-Package-" + spdxID(m.Path+"-"+m.Version)
			modules[m.Path+"@"+m.Version] = pkg{Name: m.Path, SPDXID: mid, VersionInfo: m.Version, DownloadLocation: "https://proxy.golang.org/" + m.Path + "/@v/" + m.Version + ".zip",
				Checksums: h1(m.Sum), ExternalRefs: []ref{{"PACKAGE-MANAGER", "purl", "pkg:golang/" + m.Path + "@" + m.Version}}}
			d.Relationships = append(d.Relationships, relationship{id, "DEPENDS_ON", mid})
		}
	}
	keys := make([]string, 0, len(modules))
	for k := range modules {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		d.Packages = append(d.Packages, modules[k])
	}
	return d, nil
}

// h1 is a module's go.sum hash (a SHA-256 of its file tree, base64) as an
// SPDX checksum (hex).
func h1(sum string) []checksum {
	raw, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(sum, "h1:"))
	if !strings.HasPrefix(sum, "h1:") || err != nil || len(raw) != sha256.Size {
		return nil
	}
	return []checksum{{"SHA256", hex.EncodeToString(raw)}}
}

func fileSHA256(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:]), nil
}

// spdxID keeps the letters, digits, dots and dashes SPDX ids allow.
func spdxID(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '-' {
			return r
		}
		return '-'
	}, s)
}
