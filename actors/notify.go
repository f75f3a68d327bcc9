package actors

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"

	"github.com/wardenhq/warden/actors/environment"
)

// Notifications (E10): the outbox of a committed environment-ready event is
// delivered outside the mailbox and retried with the same identity.

// MaxNotifyAttempts bounds the deliveries of one notification: with the
// back-off below that is most of a day, and the record stays in the outbox
// (and the view) either way.
const MaxNotifyAttempts = 12

// send delivers a notification outside the mailbox; a failure is retried
// with back-off (NotifyBackoff doubling), never changing readiness (E10).
func (a *envActor) send(n environment.Notification, attempt int) {
	sys, id := a.sys, a.id
	sys.goEffect(func(ctx context.Context) {
		ok := sys.notify(ctx, n)
		sys.route(kindEnv, id, envEvent{ev: environment.Delivered{Key: n.Key, OK: ok}})
		if !ok && attempt+1 < MaxNotifyAttempts {
			sys.cfg.Clock.AfterFunc(sys.cfg.Env.NotifyBackoff<<min(attempt, 10), func() {
				sys.route(kindEnv, id, envResend{n: n, attempt: attempt + 1})
			})
		}
	})
}

// notify delivers one outbox record (E10). The key is sent as the
// Idempotency-Key, so a repeated delivery carries the same identity.
func (s *System) notify(ctx context.Context, n environment.Notification) bool {
	if s.cfg.Env.NotifyEndpoint == "" {
		return false
	}
	body, _ := json.Marshal(map[string]string{"key": n.Key, "event": n.Event, "url": n.URL})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.cfg.Env.NotifyEndpoint, bytes.NewReader(body))
	if err != nil {
		return false
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", n.Key)
	client := s.cfg.Env.Client
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode/100 == 2
}
