package local

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/wardenhq/warden/internal/driver"
)

// withSeed is a data driver over the test cluster, with env's leftovers
// of an earlier run dropped and the seed made afresh of rows rows.
func withSeed(t *testing.T, env, seed string, rows int) *Data {
	t.Helper()
	fresh(t, env)
	freshSeeds(t, seed)
	d := &Data{Admin: adminDSN, Migrations: migrations}
	_, err := d.MakeSeed(context.Background(), seed, seedRows(rows))
	require.NoError(t, err)
	return d
}

// freshSeeds drops the seeds left by an earlier run of the same test in
// this cluster (go test -count).
func freshSeeds(t *testing.T, names ...string) {
	t.Helper()
	for _, n := range names {
		require.NoError(t, (&Data{Admin: adminDSN}).RemoveSeed(context.Background(), n))
	}
}

func fromSeed(t *testing.T, d *Data, env, seed string) driver.CapabilityResult {
	t.Helper()
	res, err := d.Do(context.Background(), driver.CapabilityRequest{Capability: "database", Op: "apply", EnvID: env, Identity: "db-" + env,
		Generation: 1, DataFrom: seed})
	require.NoError(t, err)
	return res
}

// seedRows is a seed's SQL: rows 2 to n+1 after the migrations' one.
func seedRows(n int) string {
	return fmt.Sprintf("INSERT INTO greeting SELECT g, 'seeded row ' || g FROM generate_series(2, %d) g", n+1)
}

// TestP20APreviewsDatabaseIsACopyOfItsSeed: a seed is made once from the
// migrations and its SQL; a preview's database made from it holds the
// seed's rows, is its own role's to the last table, names the seed in its
// mark, and its migrations run forward from the ledger the seed holds.
// Removing the seed leaves the copies as they are.
func TestP20APreviewsDatabaseIsACopyOfItsSeed(t *testing.T) {
	fresh(t, "seeded-1", "seeded-2")
	freshSeeds(t, "demo")
	ctx := context.Background()
	d := &Data{Admin: adminDSN, Migrations: migrations}
	seed, err := d.MakeSeed(ctx, "demo", seedRows(1000))
	require.NoError(t, err)
	require.Equal(t, SeedFingerprint(migrations, seedRows(1000)), seed.Fingerprint)

	res := fromSeed(t, d, "seeded-1", "demo")
	require.True(t, res.OK, res.Message)
	require.Equal(t, "owned by role db-seeded-1, made for seeded-1 generation 1, from seed demo (fingerprint "+seed.Fingerprint+")", res.Observation.Detail,
		"the observation, and so the step's receipt, names the seed and what it was made from")
	require.Equal(t, 1001, sql(t, "db-seeded-1", "SELECT count(*)::int FROM greeting"), "the migrations' row and the seed's thousand")
	require.Equal(t, 0, sql(t, "db-seeded-1", "SELECT count(*)::int FROM pg_tables WHERE schemaname = 'public' AND tableowner <> 'db-seeded-1'"),
		"every table is the preview's role's")
	require.Equal(t, fmt.Sprintf("warden environment=seeded-1 generation=1 seed=demo fingerprint=%s", seed.Fingerprint),
		sqlText(t, "SELECT shobj_description(oid, 'pg_database') FROM pg_database WHERE datname = 'db-seeded-1'"))
	require.True(t, fromSeed(t, d, "seeded-1", "demo").OK, "applied again, it finds its copy")

	later := &Data{Admin: adminDSN, Migrations: append(migrations[:2:2], Migration{ID: "003_more", SQL: "ALTER TABLE greeting ADD COLUMN lang text"})}
	res = do(t, later, "migrations", "apply", "seeded-1")
	require.True(t, res.OK, res.Message)
	require.Equal(t, "ledger 001_init,002_hello,003_more", res.Observation.Detail, "only the migration the seed does not hold ran")
	require.Equal(t, 1001, sql(t, "db-seeded-1", "SELECT count(*)::int FROM greeting WHERE lang IS NULL"))

	require.True(t, fromSeed(t, d, "seeded-2", "demo").OK)
	require.Equal(t, &Seed{Name: "demo", Fingerprint: seed.Fingerprint, Previews: []string{"seeded-1", "seeded-2"}}, listed(t, d, "demo"))

	require.NoError(t, d.RemoveSeed(ctx, "demo"))
	require.Nil(t, listed(t, d, "demo"))
	require.Equal(t, 1001, sql(t, "db-seeded-2", "SELECT count(*)::int FROM greeting"), "a copy outlives its seed")
	require.True(t, do(t, d, "database", "remove", "seeded-2").OK, "and is removed as any preview's database")
}

// TestP20AMissingSeedIsAStructuredFailure: a preview asking for a seed
// that is not there fails with a category and a message naming the
// seed, and no database is made for it (never a silent empty one).
func TestP20AMissingSeedIsAStructuredFailure(t *testing.T) {
	fresh(t, "seeded-3")
	freshSeeds(t, "nowhere")
	d := &Data{Admin: adminDSN, Migrations: migrations}
	res := fromSeed(t, d, "seeded-3", "nowhere")
	require.False(t, res.OK)
	require.Equal(t, "configuration", res.Category)
	require.Contains(t, res.Message, "seed nowhere does not exist")
	require.False(t, do(t, d, "database", "observe", "seeded-3").Observation.Exists, "no empty database in its place")
	require.Equal(t, "configuration", fromSeed(t, d, "seeded-3", "Not A Name").Category)
}

// TestP20ASeedIsMadeOnce: made again from the same it is left as it is;
// from something else it is refused; one a crash left half made is made
// again; a same-name database without warden's mark is never touched.
func TestP20ASeedIsMadeOnce(t *testing.T) {
	freshSeeds(t, "once", "half")
	execSQL(t, `DROP DATABASE IF EXISTS "seed-other" WITH (FORCE)`)
	ctx := context.Background()
	d := &Data{Admin: adminDSN, Migrations: migrations}
	first, err := d.MakeSeed(ctx, "once", seedRows(10))
	require.NoError(t, err)
	again, err := d.MakeSeed(ctx, "once", seedRows(10))
	require.NoError(t, err)
	require.Equal(t, first, again)
	_, err = d.MakeSeed(ctx, "once", seedRows(20))
	require.ErrorContains(t, err, "made from something else")

	execSQL(t, `CREATE DATABASE "seed-half"`)
	execSQL(t, `COMMENT ON DATABASE "seed-half" IS 'warden seed=half fingerprint=00 state=making'`)
	_, err = d.MakeSeed(ctx, "half", seedRows(5))
	require.NoError(t, err, "a half-made seed is made again")
	res := fromSeed(t, d, "seeded-4", "half")
	require.True(t, res.OK, res.Message)
	require.Equal(t, 6, sql(t, "db-seeded-4", "SELECT count(*)::int FROM greeting"))
	require.True(t, do(t, d, "database", "remove", "seeded-4").OK)

	execSQL(t, `CREATE DATABASE "seed-other"`)
	_, err = d.MakeSeed(ctx, "other", seedRows(5))
	require.ErrorContains(t, err, "without warden's mark: left in place")
	require.ErrorContains(t, d.RemoveSeed(ctx, "other"), "left in place")
	require.Equal(t, 1, sql(t, "postgres", "SELECT count(*)::int FROM pg_database WHERE datname = 'seed-other'"))

	_, err = d.MakeSeed(ctx, "broken", "INSERT INTO nowhere VALUES (1)")
	require.ErrorContains(t, err, "its SQL failed and was rolled back")
	require.Equal(t, 0, sql(t, "postgres", "SELECT count(*)::int FROM pg_database WHERE datname = 'seed-broken'"), "a failed seed leaves no database")
	require.Equal(t, 0, sql(t, "postgres", "SELECT count(*)::int FROM pg_roles WHERE rolname = 'seed-broken'"), "nor its role")
}

// TestP20ASeedInUseIsTransient: a seed someone opened to connections and
// is connected to cannot be copied now: a transient failure that says
// so, and the copy is made once the connection is gone.
func TestP20ASeedInUseIsTransient(t *testing.T) {
	ctx := context.Background()
	d := withSeed(t, "seeded-5", "busy", 3)
	execSQL(t, `ALTER DATABASE "seed-busy" WITH ALLOW_CONNECTIONS true`)
	c, err := d.connectTo(ctx, "seed-busy")
	require.NoError(t, err)
	res := fromSeed(t, d, "seeded-5", "busy")
	require.Equal(t, "transient", res.Category, res.Message)
	require.Contains(t, res.Message, "seed busy is in use")
	require.NoError(t, c.Close(ctx))
	res = fromSeed(t, d, "seeded-5", "busy")
	require.True(t, res.OK, res.Message)
	require.Equal(t, 4, sql(t, "db-seeded-5", "SELECT count(*)::int FROM greeting"))
	require.True(t, do(t, d, "database", "remove", "seeded-5").OK)
	freshSeeds(t, "busy")
}

// TestP20ACopyWhoseSeedIsGoneIsFinishedAfterACrash: a copy made before a
// crash, unmarked, whose seed was removed since, is marked on the next
// apply: its seed's role is gone, so it owns nothing to hand over.
func TestP20ACopyWhoseSeedIsGoneIsFinishedAfterACrash(t *testing.T) {
	ctx := context.Background()
	d := withSeed(t, "seeded-6", "gone", 2)
	require.True(t, fromSeed(t, d, "seeded-6", "gone").OK)
	execSQL(t, `COMMENT ON DATABASE "db-seeded-6" IS NULL`) // the crash came before the mark
	require.NoError(t, d.RemoveSeed(ctx, "gone"))
	res := fromSeed(t, d, "seeded-6", "gone")
	require.True(t, res.OK, res.Message)
	require.Equal(t, "owned by role db-seeded-6, made for seeded-6 generation 1, from seed gone (removed before this copy was marked: what it was made from is not known)",
		res.Observation.Detail)
	require.Equal(t, 3, sql(t, "db-seeded-6", "SELECT count(*)::int FROM greeting"))
	require.True(t, do(t, d, "database", "remove", "seeded-6").OK)
}

// listed is the seed name as Seeds lists it, nil if it does not.
func listed(t *testing.T, d *Data, name string) *Seed {
	t.Helper()
	seeds, err := d.Seeds(context.Background())
	require.NoError(t, err)
	for _, s := range seeds {
		if s.Name == name {
			return &s
		}
	}
	return nil
}

func sqlText(t *testing.T, q string) string {
	t.Helper()
	c, err := (&Data{Admin: adminDSN}).connectTo(context.Background(), "postgres")
	require.NoError(t, err)
	defer c.Close(context.Background())
	var s string
	require.NoError(t, c.QueryRow(context.Background(), q).Scan(&s))
	return s
}

// dumpRows is a seed's SQL as a dump of n rows would be: INSERT statements
// of literal rows (a thousand to a statement, as pg_dump --rows-per-insert
// writes them), rows 2 to n+1.
func dumpRows(n int) string {
	var b strings.Builder
	for i := 2; i <= n+1; i++ {
		if (i-2)%1000 == 0 {
			if i > 2 {
				b.WriteString(";\n")
			}
			b.WriteString("INSERT INTO greeting (id, text) VALUES ")
		} else {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "(%d, 'seeded row %d, a line of text as an application keeps')", i, i)
	}
	b.WriteString(";\n")
	return b.String()
}

const benchRows = 100_000

// benchPreviewData measures a preview's data made ready: its database
// applied, then its migrations, d's way; the database is removed between
// runs, outside the timing.
func benchPreviewData(b *testing.B, d *Data, seed string) {
	ctx := context.Background()
	for i := 0; b.Loop(); i++ {
		env := fmt.Sprintf("bench-%d", i)
		req := driver.CapabilityRequest{Capability: "database", Op: "apply", EnvID: env, Identity: "db-" + env, Generation: 1, DataFrom: seed}
		res, err := d.Do(ctx, req)
		if err != nil || !res.OK {
			b.Fatalf("database: %v %s", err, res.Message)
		}
		req.Capability = "migrations"
		if res, err := d.Do(ctx, req); err != nil || !res.OK {
			b.Fatalf("migrations: %v %s", err, res.Message)
		}
		b.StopTimer()
		if n := sqlCount(b, req.Identity); n != benchRows+1 {
			b.Fatalf("%d rows, not %d", n, benchRows+1)
		}
		req.Capability, req.Op = "database", "remove"
		if res, err := d.Do(ctx, req); err != nil || !res.OK {
			b.Fatalf("remove: %v %s", err, res.Message)
		}
		b.StartTimer()
	}
}

func sqlCount(b *testing.B, db string) int {
	c, err := (&Data{Admin: adminDSN}).connectTo(context.Background(), db)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close(context.Background())
	var n int
	if err := c.QueryRow(context.Background(), "SELECT count(*)::int FROM greeting").Scan(&n); err != nil {
		b.Fatal(err)
	}
	return n
}

// BenchmarkP20PreviewDataFromASeed: a preview's data of 100,000 rows,
// copied from a seed made once beforehand (not timed).
func BenchmarkP20PreviewDataFromASeed(b *testing.B) {
	d := &Data{Admin: adminDSN, Migrations: migrations}
	if err := d.RemoveSeed(context.Background(), "bench"); err != nil {
		b.Fatal(err)
	}
	if _, err := d.MakeSeed(context.Background(), "bench", dumpRows(benchRows)); err != nil {
		b.Fatal(err)
	}
	benchPreviewData(b, d, "bench")
}

// BenchmarkP20PreviewDataFromItsSQL: the same preview running the same
// SQL itself, as its last migration (the baseline).
func BenchmarkP20PreviewDataFromItsSQL(b *testing.B) {
	d := &Data{Admin: adminDSN, Migrations: append(migrations[:2:2], Migration{ID: "003_seed", SQL: dumpRows(benchRows)})}
	benchPreviewData(b, d, "")
}
