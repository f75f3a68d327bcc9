package admission_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
	"github.com/stretchr/testify/require"

	. "github.com/wardenhq/warden/actors/admission"
	"github.com/wardenhq/warden/actors/entity"
	"github.com/wardenhq/warden/actors/record"
	"github.com/wardenhq/warden/actors/runtime"
	"github.com/wardenhq/warden/internal/explaincheck"
)

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// TestAdmission runs the golden scripts in testdata/. Each case names the
// rule (A*) it shows. Commands:
//
//	pool name=N limit=L       start a fresh pool
//	ask job=J [at=MINUTES]    Step(Ask)
//	release job=J [at=M]      Step(Release)
//	rebuild limit=L next=S    Rebuild from records given as input lines
//	                          "job seq status"
func TestAdmission(t *testing.T) { walkGoldens(t, nil) }

// TestO17PoolAwaitingListsWhatStepAccepts holds a pool's awaiting to Step
// both ways on every state the golden scripts reach (explaincheck): each
// release and ask it lists changes the pool, and each that changes it is
// listed.
func TestO17PoolAwaitingListsWhatStepAccepts(t *testing.T) {
	states := 0
	walkGoldens(t, func(t *testing.T, pos string, p Pool, now time.Time) {
		states++
		for _, bad := range explaincheck.Pool(p, now) {
			t.Errorf("%s: %s", pos, bad)
		}
	})
	if states < 20 {
		t.Fatalf("only %d states walked", states)
	}
}

// walkGoldens runs the golden scripts, and shows seen, if set, each pool
// they reach.
func walkGoldens(t *testing.T, seen func(t *testing.T, pos string, p Pool, now time.Time)) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		var p Pool
		var now time.Time
		run := func(t *testing.T, d *datadriven.TestData) string {
			at := 0
			d.MaybeScanArgs(t, "at", &at)
			now = epoch.Add(time.Duration(at) * time.Minute)
			switch d.Cmd {
			case "pool":
				var name string
				var limit int
				d.ScanArgs(t, "name", &name)
				d.ScanArgs(t, "limit", &limit)
				p = New(name, limit)
				return show(p)
			case "ask", "release":
				var job string
				d.ScanArgs(t, "job", &job)
				var ev Event = Ask{Job: job}
				if d.Cmd == "release" {
					ev = Release{Job: job}
				}
				next, out := Step(p, ev, now)
				before := p
				p = next
				if out.Err != nil {
					return entity.Format(out, now) + "write: none\n"
				}
				return entity.Format(out, now) + "write: " + runtime.DescribeWrite(record.PoolWrites{}, next.Name, record.Pool{Pool: before}, record.Pool{Pool: next}, out, "") + "\n" + show(p)
			case "rebuild":
				var limit int
				var next uint64
				d.ScanArgs(t, "limit", &limit)
				d.ScanArgs(t, "next", &next)
				var recs []Job
				for _, line := range strings.Split(strings.TrimSpace(d.Input), "\n") {
					var j Job
					var status string
					if _, err := fmt.Sscanf(line, "%s %d %s", &j.ID, &j.Sequence, &status); err != nil {
						t.Fatalf("bad record line %q: %v", line, err)
					}
					j.Status = Standing(status)
					recs = append(recs, j)
				}
				var bad []Malformed
				p, bad = Rebuild(p.Name, limit, next, recs)
				var b strings.Builder
				for _, m := range bad {
					fmt.Fprintf(&b, "malformed: %s: %s\n", m.Job, m.Reason)
				}
				return b.String() + show(p)
			default:
				t.Fatalf("unknown command %q", d.Cmd)
				return ""
			}
		}
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			out := run(t, d)
			if seen != nil && p.Name != "" {
				seen(t, d.Pos, p, now)
			}
			return out
		})
	})
}

func show(p Pool) string {
	var r, q []string
	for _, j := range p.Reserved {
		r = append(r, fmt.Sprintf("%s(%d)", j.ID, j.Sequence))
	}
	for _, j := range p.Queued {
		q = append(q, fmt.Sprintf("%s(%d)", j.ID, j.Sequence))
	}
	return fmt.Sprintf("pool %s limit=%d next=%d reserved=[%s] queued=[%s]\n", p.Name, p.Limit, p.NextSequence,
		strings.Join(r, " "), strings.Join(q, " "))
}

// TestStepDoesNotMutateItsInput guards the purity the shell relies on: a
// failed persist must leave the previous pool intact in memory.
func TestStepDoesNotMutateItsInput(t *testing.T) {
	p := New("default", 1)
	p, _ = Step(p, Ask{Job: "a"}, epoch)
	p, _ = Step(p, Ask{Job: "b"}, epoch)
	before := show(p)
	_, _ = Step(p, Release{Job: "a"}, epoch)
	require.Equal(t, before, show(p))
}

// TestQueueIsBounded: a limit on everything (MaxQueue).
func TestQueueIsBounded(t *testing.T) {
	p := New("default", 0)
	for i := 0; i < MaxQueue-1; i++ {
		p.Queued = append(p.Queued, Job{ID: fmt.Sprintf("j%d", i), Sequence: uint64(i + 1), Status: Queued})
	}
	p.NextSequence = MaxQueue
	p, out := Step(p, Ask{Job: "last-place"}, epoch)
	require.NoError(t, out.Err)
	after, out := Step(p, Ask{Job: "one-more"}, epoch)
	require.NoError(t, out.Err)
	require.Equal(t, Refused, out.Answer.Status, "refused, and told so")
	require.Equal(t, []Told{{Job: "one-more", Status: Refused}}, out.Effects)
	require.False(t, out.Writes(), "nothing recorded")
	require.Len(t, after.Queued, MaxQueue)
}

// TestI7I8I9Random drives random asks and releases and checks the pool
// invariants after every step: I7 (reserved <= limit), I8 (admitted in
// queue order), I9 (no job twice).
func TestI7I8I9Random(t *testing.T) {
	for seed := int64(1); seed <= 50; seed++ {
		p := New("default", int(seed%3)+1)
		state := uint64(seed)
		rnd := func(n int) int { // splitmix-style, local: no global randomness
			state += 0x9e3779b97f4a7c15
			z := state
			z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
			z = (z ^ (z >> 27)) * 0x94d049bb133111eb
			return int((z ^ (z >> 31)) % uint64(n))
		}
		var lastGranted uint64
		for step := 0; step < 300; step++ {
			job := fmt.Sprintf("j%d", rnd(12))
			var ev Event = Ask{Job: job}
			if rnd(2) == 0 {
				ev = Release{Job: job}
			}
			next, out := Step(p, ev, epoch)
			require.NoError(t, out.Err)
			require.LessOrEqual(t, len(next.Reserved), next.Limit, "I7")
			seen := map[string]bool{}
			for _, j := range append(append([]Job(nil), next.Reserved...), next.Queued...) {
				require.False(t, seen[j.ID], "I9: %s twice", j.ID)
				seen[j.ID] = true
			}
			if _, release := ev.(Release); release {
				for _, g := range out.Effects {
					require.Equal(t, Reserved, g.Status, "a release tells only the jobs it admitted")
					require.Greater(t, g.Sequence, lastGranted, "I8: admitted out of order")
					lastGranted = g.Sequence
				}
			} else if a := out.Answer; a.Status == Reserved && len(out.Records) > 0 {
				require.Greater(t, a.Sequence, lastGranted, "I8: admitted out of order")
				lastGranted = a.Sequence
			}
			p = next
		}
	}
}
