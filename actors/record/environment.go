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
	// Deliveries is the newest chunk of the environment's deliveries, as
	// a marquee's record keeps it (Marquee.Deliveries).
	Deliveries []byte `json:"deliveries,omitempty"`
}

// NextEnvironment is the durable record after a step. Its wake-index time
// is the step's wake; or now, on a store only this process writes
// (exclusive), while an attempt is in flight: a process that starts after
// a crash takes its dead predecessor's attempts over at once rather than
// when their leases would have expired. A live process's timer is armed
// at the step's wake all the same.
func NextEnvironment(e environment.Env, rd environment.Outcome, now time.Time, exclusive bool) Environment {
	r := Environment{Env: e, WakeAt: rd.Wake}
	if e.Attempt != nil && exclusive {
		r.WakeAt = now
	}
	return r
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

func (EnvironmentWrites) RecentDeliveries(r Environment) persistence.InRecord {
	return persistence.InRecord{Key: string(persistence.EnvKey(r.Env.ID)), Chunk: r.Deliveries}
}

func (EnvironmentWrites) WithRecentDeliveries(r Environment, chunk []byte) Environment {
	r.Deliveries = chunk
	return r
}

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
	return listPage(st, persistence.EnvPrefix, after, limit, maxScan, func(r Environment) environment.Env { return r.Env }, keep)
}
