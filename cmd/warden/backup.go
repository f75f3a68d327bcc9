package main

import (
	"archive/tar"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/wardenhq/warden/actors"
	"github.com/wardenhq/warden/actors/environment"
	"github.com/wardenhq/warden/actors/marquee"
	"github.com/wardenhq/warden/cmd/internal/buildinfo"
	"github.com/wardenhq/warden/internal/trust"
	"github.com/wardenhq/warden/persistence"
)

// A backup is a directory: manifest.json, then either store/ (a
// Pebble checkpoint) or etcd.snapshot (etcd's own snapshot). The running
// warden makes it and streams it as a tar, manifest first; `warden backup`
// writes it and checks every file against the manifest; `warden restore`
// checks it again and verifies the records before using it.

const (
	manifestName    = "manifest.json"
	backupStoreDir  = "store"
	etcdSnapshot    = "etcd.snapshot"
	backupKind      = "warden-backup"
	backendPebble   = "pebble"
	backendEtcd     = "etcd"
	maxManifest     = 1 << 20
	maxBackupFiles  = 100_000
	maxBackupFileSz = 1 << 40
)

// manifest says what a backup holds: enough to refuse one that is
// incomplete, altered or too new, and which seal keys it needs, never the
// keys themselves.
type manifest struct {
	Kind       string          `json:"kind"`
	Backend    string          `json:"backend"`
	Format     int             `json:"format"`
	WrittenBy  string          `json:"written_by,omitempty"`
	TakenBy    string          `json:"taken_by"`
	TakenAt    time.Time       `json:"taken_at"`
	SealKeyIDs []string        `json:"seal_key_ids"`
	Marquees   int             `json:"marquees"`
	Envs       int             `json:"environments"`
	Files      []manifestEntry `json:"files"`
}

type manifestEntry struct {
	Name   string `json:"name"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

func (m manifest) bytes() int64 {
	var n int64
	for _, f := range m.Files {
		n += f.Size
	}
	return n
}

// maintenance is the running process's side of the maintenance
// endpoints (httpapi.Maintenance).
type maintenance struct {
	p *process
}

func (m maintenance) verifyOptions() actors.VerifyOptions {
	c := m.p.c
	return actors.VerifyOptions{Sealer: m.p.sealer, Machine: marquee.Machine{Config: c.Rules},
		EnvMachine: environment.Machine{Config: environment.DefaultConfig()}, Pools: c.Pools, DedupRetention: c.DedupRetention}
}

// Verify checks a point-in-time view of the store, judged at now.
func (m maintenance) Verify(context.Context) (actors.VerifyReport, error) {
	view, err := m.p.store.View()
	if err != nil {
		return actors.VerifyReport{}, err
	}
	defer view.Close()
	o := m.verifyOptions()
	o.Now = time.Now()
	return actors.Verify(view, o)
}

// Reseal rewrites this node's records still under an older seal key.
func (m maintenance) Reseal(ctx context.Context) (actors.ResealResult, error) {
	return m.p.sys.ResealOwned(ctx)
}

// Backup copies the store into a scratch directory beside it (a
// checkpoint hard-links Pebble's sstables, so it must be on the same
// filesystem), checks the copy, and streams it.
func (m maintenance) Backup(ctx context.Context, w io.Writer) error {
	scratch, err := os.MkdirTemp(m.p.c.Data, "backup-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(scratch)
	man := manifest{Kind: backupKind, TakenBy: buildinfo.Read().Short(), TakenAt: time.Now().UTC()}
	if m.p.store.IsEtcd() {
		man.Backend = backendEtcd
		err = m.snapshotEtcd(ctx, scratch, &man)
	} else {
		man.Backend = backendPebble
		err = m.checkpoint(scratch, &man)
	}
	if err != nil {
		return err
	}
	if man.Files, err = describeFiles(scratch); err != nil {
		return err
	}
	return writeBackupTar(w, scratch, man)
}

func (m maintenance) checkpoint(scratch string, man *manifest) error {
	dir := filepath.Join(scratch, backupStoreDir)
	if err := m.p.store.Checkpoint(dir); err != nil {
		return err
	}
	st, err := persistence.OpenReadOnly(dir, nil)
	if err != nil {
		return fmt.Errorf("the checkpoint does not open: %w", err)
	}
	defer st.Close()
	rep, err := actors.Verify(st, m.verifyOptions())
	if err != nil {
		return err
	}
	summarize(man, rep)
	return nil
}

// snapshotEtcd saves etcd's snapshot; the records are summarized from a
// view of the store taken just after it (the seal key ids a restore needs).
func (m maintenance) snapshotEtcd(ctx context.Context, scratch string, man *manifest) error {
	rc, err := m.p.store.EtcdSnapshot(ctx)
	if err != nil {
		return err
	}
	defer rc.Close()
	if _, err := writeNewFile(filepath.Join(scratch, etcdSnapshot), rc); err != nil {
		return fmt.Errorf("etcd snapshot: %w", err)
	}
	rep, err := m.Verify(ctx)
	if err != nil {
		return err
	}
	summarize(man, rep)
	return nil
}

func summarize(man *manifest, rep actors.VerifyReport) {
	man.Format, man.WrittenBy = rep.Format.Format, rep.Format.WrittenBy
	man.SealKeyIDs = append([]string{}, rep.KeyIDs...)
	man.Marquees, man.Envs = rep.Marquees, rep.Envs
}

// describeFiles lists every regular file under dir with its digest, in
// name order.
func describeFiles(dir string) ([]manifestEntry, error) {
	var out []manifestEntry
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		sum, size, err := digestFile(path)
		if err != nil {
			return err
		}
		out = append(out, manifestEntry{Name: filepath.ToSlash(rel), Size: size, SHA256: sum})
		return nil
	})
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, err
}

func digestFile(path string) (string, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	return hex.EncodeToString(h.Sum(nil)), n, err
}

func writeBackupTar(w io.Writer, dir string, man manifest) error {
	tw := tar.NewWriter(w)
	raw, _ := json.MarshalIndent(man, "", "  ")
	if err := tw.WriteHeader(&tar.Header{Name: manifestName, Mode: 0o600, Size: int64(len(raw)), ModTime: man.TakenAt}); err != nil {
		return err
	}
	if _, err := tw.Write(raw); err != nil {
		return err
	}
	for _, e := range man.Files {
		if err := tarFile(tw, filepath.Join(dir, filepath.FromSlash(e.Name)), e, man.TakenAt); err != nil {
			return err
		}
	}
	return tw.Close()
}

func tarFile(tw *tar.Writer, path string, e manifestEntry, at time.Time) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := tw.WriteHeader(&tar.Header{Name: e.Name, Mode: 0o600, Size: e.Size, ModTime: at}); err != nil {
		return err
	}
	_, err = io.CopyN(tw, f, e.Size)
	return err
}

// readBackupTar writes a backup stream into dir (new or empty), checking
// each file against the manifest that came first, and returns the
// manifest. Names are confined to dir; sizes and counts are bounded.
func readBackupTar(r io.Reader, dir string) (manifest, error) {
	tr := tar.NewReader(r)
	var man manifest
	h, err := tr.Next()
	if err != nil || h.Name != manifestName || h.Size > maxManifest {
		return man, fmt.Errorf("the stream does not start with a manifest (%v)", err)
	}
	raw, err := io.ReadAll(io.LimitReader(tr, maxManifest))
	if err != nil {
		return man, err
	}
	if man, err = parseManifest(raw); err != nil {
		return man, err
	}
	want := map[string]manifestEntry{}
	for _, e := range man.Files {
		want[e.Name] = e
	}
	if err := writeFileAtomic(filepath.Join(dir, manifestName), raw); err != nil {
		return man, err
	}
	got := 0
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return man, fmt.Errorf("the backup stream ended early: %w", err)
		}
		e, ok := want[h.Name]
		if !ok || h.Size != e.Size {
			return man, fmt.Errorf("the stream holds %s (%d bytes), which the manifest does not list so", h.Name, h.Size)
		}
		if err := receiveFile(tr, dir, e); err != nil {
			return man, err
		}
		got++
	}
	if got != len(man.Files) {
		return man, fmt.Errorf("the stream ended after %d of %d files", got, len(man.Files))
	}
	return man, nil
}

func receiveFile(r io.Reader, dir string, e manifestEntry) error {
	path := filepath.Join(dir, filepath.FromSlash(e.Name))
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	h := sha256.New()
	n, err := writeNewFile(path, io.TeeReader(io.LimitReader(r, e.Size), h))
	if err == nil && n != e.Size {
		err = fmt.Errorf("%d of %d bytes: %w", n, e.Size, io.ErrUnexpectedEOF)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", e.Name, err)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != e.SHA256 {
		return fmt.Errorf("%s: SHA-256 %s, the manifest says %s", e.Name, got, e.SHA256)
	}
	return nil
}

// parseManifest decodes and bounds a manifest: a name outside the
// backup, an unknown backend or a format newer than this build is refused.
func parseManifest(raw []byte) (manifest, error) {
	var m manifest
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return m, fmt.Errorf("manifest: %w", err)
	}
	switch {
	case m.Kind != backupKind:
		return m, fmt.Errorf("manifest: kind %q is not a warden backup", m.Kind)
	case m.Backend != backendPebble && m.Backend != backendEtcd:
		return m, fmt.Errorf("manifest: backend %q", m.Backend)
	case m.Format > persistence.StoreFormat:
		return m, &persistence.NewerFormatError{Stored: persistence.FormatRecord{Format: m.Format, WrittenBy: m.WrittenBy}, This: buildinfo.Read().Short()}
	case len(m.Files) == 0 || len(m.Files) > maxBackupFiles:
		return m, fmt.Errorf("manifest: %d files", len(m.Files))
	}
	seen := map[string]bool{}
	for _, f := range m.Files {
		clean := filepath.ToSlash(filepath.Clean(f.Name))
		if clean != f.Name || strings.HasPrefix(clean, "../") || filepath.IsAbs(f.Name) || f.Name == manifestName || seen[f.Name] ||
			!(strings.HasPrefix(f.Name, backupStoreDir+"/") || f.Name == etcdSnapshot) {
			return m, fmt.Errorf("manifest: file name %q", f.Name)
		}
		if f.Size < 0 || f.Size > maxBackupFileSz || len(f.SHA256) != 64 {
			return m, fmt.Errorf("manifest: %s: size %d, digest %q", f.Name, f.Size, f.SHA256)
		}
		seen[f.Name] = true
	}
	return m, nil
}

// checkBackupDir reads a backup directory's manifest and checks every
// file it lists against it (D5: a backup that cannot be verified is
// refused before anything is restored).
func checkBackupDir(dir string) (manifest, error) {
	raw, err := os.ReadFile(filepath.Join(dir, manifestName))
	if err != nil {
		return manifest{}, fmt.Errorf("not a backup: %w", err)
	}
	man, err := parseManifest(raw)
	if err != nil {
		return man, err
	}
	for _, f := range man.Files {
		sum, size, err := digestFile(filepath.Join(dir, filepath.FromSlash(f.Name)))
		if err != nil {
			return man, fmt.Errorf("backup file %s: %w", f.Name, err)
		}
		if size != f.Size || sum != f.SHA256 {
			return man, fmt.Errorf("backup file %s is %d bytes with SHA-256 %s; the manifest says %d bytes, %s", f.Name, size, sum, f.Size, f.SHA256)
		}
	}
	return man, nil
}

// missingKeys are the seal key ids a backup needs that ring does not hold.
func missingKeys(man manifest, ring *trust.Keyring) []string {
	var out []string
	for _, id := range man.SealKeyIDs {
		if ring == nil {
			out = append(out, id)
			continue
		}
		if _, ok := ring.Find(id); !ok {
			out = append(out, id)
		}
	}
	return out
}

// emptyDir makes sure dir is absent or empty (a restore or a backup never
// writes over anything).
func emptyDir(dir string) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if len(entries) > 0 {
		return fmt.Errorf("%s is not empty", dir)
	}
	return nil
}

func writeFileAtomic(path string, b []byte) error { return trust.WriteFileAtomic(path, b) }

// writeNewFile writes what r holds to a file that must not exist yet,
// private (T11) and synced before it is closed: every file a backup or a
// restore lands.
func writeNewFile(path string, r io.Reader) (int64, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return 0, err
	}
	n, err := io.Copy(f, r)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return n, err
}
