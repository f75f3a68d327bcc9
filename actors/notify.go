package actors

import (
	"context"
	"time"

	"github.com/wardenhq/warden/actors/driver"
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
	if sys.cfg.Env.Notifier == nil {
		// Nowhere to send: nothing is tried or retried; the view says why
		// (O2) and the record stays in the outbox.
		return
	}
	sys.goEffect(func(ctx context.Context) {
		err := sys.notify(ctx, n)
		ok := err == nil
		d := environment.Delivered{Key: n.Key, OK: ok}
		if err != nil {
			d.Error = err.Error()
		}
		sys.route(kindEnv, id, envEvent{ev: d})
		if !ok && attempt+1 < MaxNotifyAttempts {
			sys.cfg.Clock.AfterFunc(sys.cfg.Env.NotifyBackoff<<min(attempt, 10), func() {
				sys.route(kindEnv, id, envResend{n: n, attempt: attempt + 1})
			})
		}
	})
}

// notify delivers one outbox record (E10) through the configured notifier;
// the error, secrets scrubbed, is kept on the record (O2).
func (s *System) notify(ctx context.Context, n environment.Notification) error {
	start := time.Now()
	err := s.cfg.Env.Notifier.Notify(ctx, driver.Notification{Key: n.Key, Event: n.Event, URL: n.URL, EnvID: n.EnvID,
		Branch: n.Branch, Revision: n.Revision, Generation: n.Generation, Detail: n.Detail})
	s.observeDriver("notify", start, err)
	if err != nil {
		err = redacted(err, s.cfg.Secrets...)
		s.log.Info("notification not delivered", "environment", n.EnvID, "key", n.Key, "err", err)
	}
	return err
}

// Notifies reports whether notifications are sent anywhere.
func (s *System) Notifies() bool { return s.cfg.Env.Notifier != nil }
