package main

import (
	"crypto/ed25519"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"time"

	"github.com/wardenhq/warden/cmd/warden/internal/config"
	"github.com/wardenhq/warden/httpapi"
	"github.com/wardenhq/warden/internal/trust"
)

// trustMaterial is every key and identity serve loads before it listens.
type trustMaterial struct {
	seal      *trust.Keyring
	signing   *trust.Keyring
	webhooks  *trust.Webhooks
	operators []httpapi.Operator
	oidc      *trust.OIDC
}

const (
	sealKeyName    = "seal.key"
	signingKeyName = "callback-signing.key"
)

// prepareDataDir makes the data directory private before anything is
// written into it: files are created 0600 and directories 0700 from
// here on (the umask is the process's, so Pebble's files and what drivers
// create follow it too), a new directory is 0700, and an existing one that
// others may read is refused with the command that fixes it.
func prepareDataDir(dir string) error {
	syscall.Umask(0o077)
	err := trust.CheckPrivate(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return os.MkdirAll(dir, 0o700)
	}
	return err
}

// loadTrust reads (or, beside the data, creates) the keys and identities.
func loadTrust(c config.Serve, log *slog.Logger) (*trustMaterial, error) {
	t := &trustMaterial{}
	var err error
	if t.seal, err = loadKeys(c.SealKeyFile, filepath.Join(c.Data, sealKeyName), "seal key", log); err != nil {
		return nil, err
	}
	if c.SealKeyFile == "" {
		// T10: said at every start, not only the first.
		log.Warn("the seal key sits beside the data it protects; keep it elsewhere in production (--seal-key-file)", "path", filepath.Join(c.Data, sealKeyName))
	}
	if t.signing, err = loadKeys(c.CallbackSigningKeyFile, filepath.Join(c.Data, signingKeyName), "callback signing key", log); err != nil {
		return nil, err
	}
	t.webhooks = &trust.Webhooks{}
	if c.WebhookSecretsFile != "" {
		b, err := trust.ReadPrivateFile(c.WebhookSecretsFile)
		if err == nil {
			t.webhooks.Secrets, err = trust.ParseLines(b, trust.ParseSecret)
		}
		if err != nil {
			return nil, fmt.Errorf("--webhook-secrets-file: %w", err)
		}
	}
	if c.WebhookPublicKeysFile != "" {
		// Public keys are not secret; only their integrity matters, so the
		// file may be readable by others.
		b, err := os.ReadFile(c.WebhookPublicKeysFile)
		if err == nil {
			t.webhooks.PublicKeys, err = trust.ParseLines(b, func(s string) (ed25519.PublicKey, error) { return trust.ParsePublicKey(s) })
		}
		if err != nil {
			return nil, fmt.Errorf("--webhook-public-keys-file: %w", err)
		}
	}
	if c.OperatorsFile != "" {
		b, err := trust.ReadPrivateFile(c.OperatorsFile)
		if err == nil {
			t.operators, err = httpapi.ParseOperators(b)
		}
		if err != nil {
			return nil, fmt.Errorf("--operators-file: %w", err)
		}
	}
	if slices.Contains(c.CallbackAuth, httpapi.ModeGitHubOIDC) {
		t.oidc = trust.NewOIDC(trust.OIDCConfig{Issuer: c.OIDCIssuer, JWKSURL: c.OIDCJWKSURL, Audience: c.OIDCAudience,
			Repository: c.OIDCRepository, WorkflowRef: c.OIDCWorkflowRef, Client: &http.Client{Timeout: 10 * time.Second}})
	}
	return t, nil
}

// loadKeys reads a keyring from the given file, or from (or into) the
// default path beside the data.
func loadKeys(given, fallback, what string, log *slog.Logger) (*trust.Keyring, error) {
	if given != "" {
		k, err := trust.LoadKeyring(given)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		return k, nil
	}
	k, created, err := trust.LoadOrCreateKeyring(fallback, keyringComment(what))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	if created {
		log.Info("created a development "+what+" beside the data (0600)", "path", fallback)
	}
	return k, nil
}
