package record

import (
	"fmt"
	"time"

	"github.com/wardenhq/warden/actors/environment"
	"github.com/wardenhq/warden/persistence"
)

// Environment is an environment's durable record.
type Environment struct {
	Env    environment.Env `json:"env"`
	WakeAt time.Time       `json:"wake_at,omitzero"`
}

// EnvironmentWrites is what an environment's step writes: its record; its
// deadline goes in the wake index.
type EnvironmentWrites struct{}

// Stage writes the record. The branch's route generation was committed by
// the branch's own entity before the create was asked (I14).
func (EnvironmentWrites) Stage(b persistence.Writer, id string, _, next Environment, _ environment.Outcome) {
	b.Put(persistence.EnvKey(id), next)
}

func (EnvironmentWrites) WakeLetter() string             { return persistence.WakeEnvironment }
func (EnvironmentWrites) WakeOf(r Environment) time.Time { return r.WakeAt }

// LoadEnvironment reads one environment record: persistence.ErrNotFound or a
// *persistence.CorruptError.
func LoadEnvironment(st *persistence.Store, id string) (Environment, error) {
	var r Environment
	key := persistence.EnvKey(id)
	if err := st.Get(key, &r); err != nil {
		return Environment{}, err
	}
	if !environment.ValidID(r.Env.ID) || r.Env.ID != id {
		return Environment{}, &persistence.CorruptError{Malformed: persistence.Malformed{Key: string(key), Reason: fmt.Sprintf("record names environment %q", r.Env.ID)}}
	}
	return r, nil
}

// ListEnvironments is one page of stored environments that keep accepts (nil:
// all; tombstones included, they are kept for leak audits, E12).
func ListEnvironments(st *persistence.Store, after string, limit, maxScan int, keep func(environment.Env) bool) ([]environment.Env, string, []persistence.Malformed, error) {
	return persistence.ListPage(st, persistence.EnvPrefix, after, limit, maxScan, func(k, v []byte) (environment.Env, error) {
		var r Environment
		err := persistence.Decode(k, v, &r)
		return r.Env, err
	}, keep)
}
