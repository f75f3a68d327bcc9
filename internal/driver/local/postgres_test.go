package local

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/wardenhq/warden/internal/driver"
	"github.com/wardenhq/warden/internal/driver/local/pgcluster"
)

// The tests run against a real PostgreSQL cluster of their own (Debian's
// postgresql; .ci/run installs it).
var adminDSN string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "warden-pg-")
	if err != nil {
		panic(err)
	}
	c, err := pgcluster.Start(filepath.Join(dir, "pg"), "warden")
	if err != nil {
		fmt.Fprintf(os.Stderr, "postgres tests cannot run: %v\n", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	adminDSN = c.DSN("postgres")
	code := m.Run()
	_ = c.Stop()
	os.RemoveAll(dir)
	os.Exit(code)
}

var migrations = []Migration{
	{ID: "001_init", SQL: "CREATE TABLE greeting (id int PRIMARY KEY, text text NOT NULL)"},
	{ID: "002_hello", SQL: "INSERT INTO greeting VALUES (1, 'hello from the preview database')"},
}

func do(t *testing.T, d *Data, capability, op, env string) driver.CapabilityResult {
	t.Helper()
	res, err := d.Do(context.Background(), driver.CapabilityRequest{Capability: capability, Op: op, EnvID: env, Identity: "db-" + env, Generation: 1})
	require.NoError(t, err)
	return res
}

func sql(t *testing.T, db, q string, args ...any) int {
	t.Helper()
	c, err := (&Data{Admin: adminDSN}).connectTo(context.Background(), db)
	require.NoError(t, err)
	defer c.Close(context.Background())
	var n int
	require.NoError(t, c.QueryRow(context.Background(), q, args...).Scan(&n))
	return n
}

func execSQL(t *testing.T, q string) {
	t.Helper()
	c, err := pgx.Connect(context.Background(), adminDSN)
	require.NoError(t, err)
	defer c.Close(context.Background())
	_, err = c.Exec(context.Background(), q)
	require.NoError(t, err)
}

// fresh drops the databases and roles of envs left by an earlier run of
// the same test in this cluster (go test -count), so each run starts
// where the first did.
func fresh(t *testing.T, envs ...string) {
	t.Helper()
	for _, env := range envs { // a role goes once no database it owns is left
		execSQL(t, `DROP DATABASE IF EXISTS "db-`+env+`" WITH (FORCE)`)
	}
	for _, env := range envs {
		execSQL(t, `DROP ROLE IF EXISTS "db-`+env+`"`)
	}
}

// TestP5DatabaseAndRoleCreatedOrFoundAndMarked: apply makes a role and a
// database it owns, both marked with the environment and generation;
// applied again it finds them; observe says whose they are (E2, E3).
func TestP5DatabaseAndRoleCreatedOrFoundAndMarked(t *testing.T) {
	fresh(t, "env-1")
	d := &Data{Admin: adminDSN, Migrations: migrations}
	for range 2 {
		res := do(t, d, "database", "apply", "env-1")
		require.True(t, res.OK, res.Message)
		require.Equal(t, &driver.CapabilityObservation{Exists: true, Owner: "env-1", Matches: true, ProviderID: "db-env-1",
			Detail: "owned by role db-env-1, made for env-1 generation 1"}, res.Observation)
	}
	obs := do(t, d, "database", "observe", "env-1").Observation
	require.True(t, obs.Exists && obs.Matches)
	require.Equal(t, 1, sql(t, "postgres", "SELECT count(*)::int FROM pg_roles WHERE rolname = 'db-env-1'"))
}

// TestP5ASameNameDatabaseOfAnotherIsAConflict: a database under the
// declared name made by hand, or by another environment, is found and
// reported as someone else's, never reused or dropped (E3, E11).
func TestP5ASameNameDatabaseOfAnotherIsAConflict(t *testing.T) {
	fresh(t, "env-2", "env-3", "env-4")
	d := &Data{Admin: adminDSN, Migrations: migrations}
	execSQL(t, `CREATE DATABASE "db-env-2"`)
	res := do(t, d, "database", "apply", "env-2")
	require.Equal(t, "unmarked", res.Observation.Owner, "a database without warden's mark is nobody's to take")
	require.False(t, res.Observation.Matches)

	require.True(t, do(t, d, "database", "apply", "env-3").OK)
	execSQL(t, `ALTER DATABASE "db-env-3" RENAME TO "db-env-4"`)
	res = do(t, d, "database", "apply", "env-4")
	require.Equal(t, "env-3", res.Observation.Owner, "another environment's database says whose it is")
	res = do(t, d, "database", "remove", "env-4")
	require.Equal(t, "conflict", res.Category)
	require.Contains(t, res.Message, "not this environment's (env-3)")
	require.True(t, do(t, d, "database", "observe", "env-4").Observation.Exists, "left in place")
	res = do(t, d, "migrations", "apply", "env-4")
	require.Equal(t, "transient", res.Category, "nobody migrates another environment's database")
}

// TestP5MigrationsRunOnceEachInOneTransaction: each migration commits
// with its ledger row inside the target database, so a second apply
// (an answer lost after the commit, E4) runs nothing twice, and a
// migration that fails leaves nothing of itself behind.
func TestP5MigrationsRunOnceEachInOneTransaction(t *testing.T) {
	fresh(t, "env-5")
	d := &Data{Admin: adminDSN, Migrations: migrations}
	require.True(t, do(t, d, "database", "apply", "env-5").OK)
	obs := do(t, d, "migrations", "observe", "env-5").Observation
	require.False(t, obs.Exists, "no ledger before the first migration")
	for range 2 {
		res := do(t, d, "migrations", "apply", "env-5")
		require.True(t, res.OK, res.Message)
		require.Equal(t, "ledger 001_init,002_hello", res.Observation.Detail)
		require.True(t, res.Observation.Matches)
	}
	require.Equal(t, 1, sql(t, "db-env-5", "SELECT count(*)::int FROM greeting"), "the insert ran once")
	require.Equal(t, 1, sql(t, "db-env-5", "SELECT count(*)::int FROM pg_tables WHERE tablename = 'greeting' AND tableowner = 'db-env-5'"),
		"what the migrations make belongs to the preview's role")

	bad := &Data{Admin: adminDSN, Migrations: append(append([]Migration(nil), migrations...),
		Migration{ID: "003_half", SQL: "CREATE TABLE half (id int); INSERT INTO nowhere VALUES (1)"})}
	res := do(t, bad, "migrations", "apply", "env-5")
	require.Equal(t, "configuration", res.Category)
	require.Contains(t, res.Message, "migration 003_half failed and was rolled back")
	require.Equal(t, 0, sql(t, "db-env-5", "SELECT count(*)::int FROM pg_tables WHERE tablename = 'half'"), "one transaction: nothing of it stays")
	require.Equal(t, "ledger 001_init,002_hello", do(t, bad, "migrations", "observe", "env-5").Observation.Detail)
	require.False(t, do(t, bad, "migrations", "observe", "env-5").Observation.Matches, "short of what the application declares")
}

// TestP9RemovalDropsOnlyWhatItOwnsAndIsObservedAbsent: removing the
// migrations drops what they made (the database stays); removing the
// database drops it and its role; a second removal finds them absent.
func TestP9RemovalDropsOnlyWhatItOwnsAndIsObservedAbsent(t *testing.T) {
	fresh(t, "env-6")
	d := &Data{Admin: adminDSN, Migrations: migrations}
	require.True(t, do(t, d, "database", "apply", "env-6").OK)
	require.True(t, do(t, d, "migrations", "apply", "env-6").OK)
	res := do(t, d, "migrations", "remove", "env-6")
	require.True(t, res.OK, res.Message)
	require.False(t, res.Observation.Exists)
	require.Equal(t, 0, sql(t, "db-env-6", "SELECT count(*)::int FROM pg_tables WHERE tablename IN ('greeting', 'warden_migrations')"))
	for range 2 {
		res = do(t, d, "database", "remove", "env-6")
		require.True(t, res.OK, res.Message)
		require.False(t, res.Observation.Exists)
	}
	require.Equal(t, 0, sql(t, "postgres", "SELECT count(*)::int FROM pg_roles WHERE rolname = 'db-env-6'"))
}

// TestP5LoadMigrationsInNameOrder: files run in name order, ids are the
// names without .sql, and a directory too large is refused.
func TestP5LoadMigrationsInNameOrder(t *testing.T) {
	dir := t.TempDir()
	for name, body := range map[string]string{"002_b.sql": "SELECT 2", "001_a.sql": "SELECT 1", "notes.txt": "x"} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600))
	}
	ms, err := LoadMigrations(dir)
	require.NoError(t, err)
	require.Equal(t, []Migration{{ID: "001_a", SQL: "SELECT 1"}, {ID: "002_b", SQL: "SELECT 2"}}, ms)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "003_big.sql"), make([]byte, maxMigrationSize+1), 0o600))
	_, err = LoadMigrations(dir)
	require.ErrorContains(t, err, "at most")
}

// TestP5IdentitiesAreCheckedBeforeAnyQuery: only names this driver makes
// reach a statement.
func TestP5IdentitiesAreCheckedBeforeAnyQuery(t *testing.T) {
	res, err := (&Data{Admin: "postgres://nobody@127.0.0.1:1/none"}).Do(context.Background(),
		driver.CapabilityRequest{Capability: "database", Op: "apply", EnvID: "x", Identity: `db"; DROP DATABASE postgres; --`})
	require.NoError(t, err)
	require.Equal(t, "configuration", res.Category)
}

// TestP10ADatabaseDroppedByHandIsSeen: observe reads the server, so a
// preview's database dropped behind warden's back is seen gone (E14).
func TestP10ADatabaseDroppedByHandIsSeen(t *testing.T) {
	fresh(t, "env-7")
	d := &Data{Admin: adminDSN, Migrations: migrations}
	require.True(t, do(t, d, "database", "apply", "env-7").OK)
	require.True(t, do(t, d, "migrations", "apply", "env-7").Observation.Matches)
	execSQL(t, `DROP DATABASE "db-env-7" WITH (FORCE)`)
	require.False(t, do(t, d, "database", "observe", "env-7").Observation.Exists)
	require.False(t, do(t, d, "migrations", "observe", "env-7").Observation.Exists, "its ledger went with it")
	require.True(t, do(t, d, "database", "apply", "env-7").Observation.Matches, "made again under the role that kept its mark")
}
