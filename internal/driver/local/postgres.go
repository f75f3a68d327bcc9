// Package local is the reference preview platform's in-process drivers
// (docs/rules/platform.md P1): one per capability, on the real parts a
// team runs previews on. This file is the data side on PostgreSQL (P5).
package local

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/wardenhq/warden/internal/driver"
)

// Data drives the "database" and "migrations" capabilities on one
// PostgreSQL server: a database and a role of the same name per
// preview (its identity, db-<env>), the role owning the database, both
// marked with the environment and generation that made them; and the
// application's migrations run inside that database, each in one
// transaction with its ledger row, the ledger a table in the database.
type Data struct {
	// Admin connects as a role that may create roles and databases.
	Admin string
	// Migrations are the application's, in the order they run.
	Migrations []Migration
	// Descriptors is the drivers' share: a call takes its
	// connections' descriptors before it opens any (connectionsPerCall).
	Descriptors *driver.Descriptors
}

// connectionsPerCall is what one call opens at most at once: the admin
// connection and one to the preview's own database (its migrations).
const connectionsPerCall = 2

// Migration is one migration file: its id (the file name without .sql)
// and its SQL.
type Migration struct{ ID, SQL string }

// Limits on what is read from a migrations directory: a migration is a
// file a person wrote, not a dump.
const (
	maxMigrations    = 1000
	maxMigrationSize = 1 << 20
)

// LoadMigrations reads dir's *.sql files in name order.
func LoadMigrations(dir string) ([]Migration, error) {
	names, err := filepath.Glob(filepath.Join(dir, "*.sql"))
	if err != nil {
		return nil, err
	}
	if len(names) > maxMigrations {
		return nil, fmt.Errorf("migrations in %s: %d files, at most %d", dir, len(names), maxMigrations)
	}
	sort.Strings(names)
	out := make([]Migration, 0, len(names))
	for _, n := range names {
		st, err := os.Stat(n)
		if err != nil {
			return nil, err
		}
		if st.Size() > maxMigrationSize {
			return nil, fmt.Errorf("migration %s: %d bytes, at most %d", n, st.Size(), maxMigrationSize)
		}
		b, err := os.ReadFile(n)
		if err != nil {
			return nil, err
		}
		out = append(out, Migration{ID: strings.TrimSuffix(filepath.Base(n), ".sql"), SQL: string(b)})
	}
	return out, nil
}

// ledgerTable is the migrations' ledger inside each preview's database.
const ledgerTable = "warden_migrations"

// Do performs one operation. A refusal the controller must see as a
// category (a same-name resource of another environment, E3) is a result;
// an error is a call whose outcome is unknown, observed next (E4).
func (d *Data) Do(ctx context.Context, r driver.CapabilityRequest) (driver.CapabilityResult, error) {
	if !validName(r.Identity) {
		return driver.CapabilityResult{Category: "configuration", Message: fmt.Sprintf("identity %q is not a database name this driver makes", r.Identity)}, nil
	}
	done, err := d.Descriptors.Connections(ctx, connectionsPerCall, "postgres")
	if err != nil {
		return driver.CapabilityResult{}, err
	}
	defer done()
	admin, err := pgx.Connect(ctx, d.Admin)
	if err != nil {
		return driver.CapabilityResult{}, fmt.Errorf("postgres: %w", err)
	}
	defer admin.Close(context.WithoutCancel(ctx))
	switch r.Capability + "/" + r.Op {
	case "database/observe":
		o, err := observeDatabase(ctx, admin, r.Identity)
		return observed(o, err)
	case "database/apply":
		return d.createDatabase(ctx, admin, r)
	case "database/remove":
		return d.dropDatabase(ctx, admin, r)
	case "migrations/observe":
		o, err := d.observeMigrations(ctx, admin, r.Identity)
		return observed(o, err)
	case "migrations/apply":
		return d.migrate(ctx, admin, r)
	case "migrations/remove":
		return d.unmigrate(ctx, admin, r)
	}
	return driver.CapabilityResult{Category: "configuration", Message: "postgres does not do " + r.Capability + "/" + r.Op}, nil
}

func observed(o *driver.CapabilityObservation, err error) (driver.CapabilityResult, error) {
	if err != nil {
		return driver.CapabilityResult{}, err
	}
	return driver.CapabilityResult{OK: true, Observation: o}, nil
}

// validName: the identities this driver makes (db-<environment id>),
// which are also safe PostgreSQL names once quoted.
var validNameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,62}$`)

func validName(s string) bool { return validNameRE.MatchString(s) }

// mark is the ownership comment on a preview's role and database; a
// database copied from a seed names it and its fingerprint too (seedOf).
func mark(env string, gen uint64) string {
	return fmt.Sprintf("warden environment=%s generation=%d", env, gen)
}

var markRE = regexp.MustCompile(`^warden environment=(\S+) generation=(\d+)(?: seed=(\S+) fingerprint=([0-9a-f]+))?$`)

// owner reads a mark: the environment, its generation, and whether the
// comment is a mark at all (a database made by hand has none).
func owner(comment string) (env string, gen uint64, ok bool) {
	env, gen, _, ok = ownerAndSeed(comment)
	return env, gen, ok
}

// ownerAndSeed is owner with the seed the database was copied from ("":
// made empty).
func ownerAndSeed(comment string) (env string, gen uint64, seed string, ok bool) {
	env, gen, seed, _, ok = markOf(comment)
	return env, gen, seed, ok
}

// markOf reads a preview database's mark: its environment and
// generation, and the seed and fingerprint it was copied from, if any.
func markOf(comment string) (env string, gen uint64, seed, fingerprint string, ok bool) {
	m := markRE.FindStringSubmatch(comment)
	if m == nil {
		return "", 0, "", "", false
	}
	gen, _ = strconv.ParseUint(m[2], 10, 64)
	return m[1], gen, m[3], m[4], true
}

func quoteLiteral(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// observeDatabase finds the database and who owns it: its own mark, or,
// if a crash came between its creation and its comment, its owning role's.
func observeDatabase(ctx context.Context, c *pgx.Conn, name string) (*driver.CapabilityObservation, error) {
	var dbComment, roleComment *string
	var roleName string
	err := c.QueryRow(ctx, `SELECT shobj_description(d.oid, 'pg_database'), r.rolname, shobj_description(r.oid, 'pg_authid')
		FROM pg_database d JOIN pg_roles r ON r.oid = d.datdba WHERE d.datname = $1`, name).Scan(&dbComment, &roleName, &roleComment)
	if errors.Is(err, pgx.ErrNoRows) {
		return &driver.CapabilityObservation{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("postgres: observe %s: %w", name, err)
	}
	o := &driver.CapabilityObservation{Exists: true, ProviderID: name}
	env, gen, seed, fingerprint, marked := markOf(deref(dbComment))
	if !marked && roleName == name {
		env, gen, marked = owner(deref(roleComment))
	}
	switch {
	case !marked:
		o.Owner, o.Detail = "unmarked", fmt.Sprintf("database %s exists without warden's mark (owner role %s)", name, roleName)
	default:
		o.Owner = env
		o.Matches = roleName == name
		o.Detail = fmt.Sprintf("owned by role %s, made for %s generation %d%s", roleName, env, gen, seedWord(seed, fingerprint))
	}
	return o, nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// createDatabase creates or finds the role, then the database it owns,
// each marked. A same-name database or role of someone else is left as
// it is: the controller's observation sees its owner.
func (d *Data) createDatabase(ctx context.Context, c *pgx.Conn, r driver.CapabilityRequest) (driver.CapabilityResult, error) {
	o, err := observeDatabase(ctx, c, r.Identity)
	if err != nil {
		return driver.CapabilityResult{}, err
	}
	if o.Exists && o.Owner != r.EnvID {
		return driver.CapabilityResult{OK: true, Observation: o}, nil
	}
	ident := pgx.Identifier{r.Identity}.Sanitize()
	var roleComment *string
	err = c.QueryRow(ctx, `SELECT shobj_description(oid, 'pg_authid') FROM pg_roles WHERE rolname = $1`, r.Identity).Scan(&roleComment)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		// LOGIN without a password: the local platform's cluster trusts
		// loopback; a server that does not refuses the role's connections.
		if _, err := c.Exec(ctx, "CREATE ROLE "+ident+" LOGIN"); err != nil {
			return driver.CapabilityResult{}, fmt.Errorf("postgres: create role %s: %w", r.Identity, err)
		}
	case err != nil:
		return driver.CapabilityResult{}, fmt.Errorf("postgres: role %s: %w", r.Identity, err)
	default:
		if env, _, ok := owner(deref(roleComment)); !ok || env != r.EnvID {
			return driver.CapabilityResult{Category: "conflict", Message: fmt.Sprintf("role %s exists and is not this environment's (%s)", r.Identity, ownerWord(env, ok))}, nil
		}
	}
	m := quoteLiteral(mark(r.EnvID, r.Generation))
	if _, err := c.Exec(ctx, "COMMENT ON ROLE "+ident+" IS "+m); err != nil {
		return driver.CapabilityResult{}, fmt.Errorf("postgres: mark role %s: %w", r.Identity, err)
	}
	if r.DataFrom != "" {
		res, fp, err := d.fromSeed(ctx, c, r, o.Exists)
		if err != nil {
			return driver.CapabilityResult{}, err
		}
		if res != nil {
			return *res, nil
		}
		m = quoteLiteral(mark(r.EnvID, r.Generation) + seedOf(r.DataFrom, fp))
	} else if !o.Exists {
		if _, err := c.Exec(ctx, "CREATE DATABASE "+ident+" OWNER "+ident); err != nil {
			return driver.CapabilityResult{}, fmt.Errorf("postgres: create database %s: %w", r.Identity, err)
		}
	}
	if _, err := c.Exec(ctx, "COMMENT ON DATABASE "+ident+" IS "+m); err != nil {
		return driver.CapabilityResult{}, fmt.Errorf("postgres: mark database %s: %w", r.Identity, err)
	}
	o, err = observeDatabase(ctx, c, r.Identity)
	return observed(o, err)
}

func ownerWord(env string, marked bool) string {
	if !marked {
		return "no warden mark"
	}
	return "made for " + env
}

// dropDatabase removes this environment's database and role; someone
// else's is never touched, and an absent one is already removed.
func (d *Data) dropDatabase(ctx context.Context, c *pgx.Conn, r driver.CapabilityRequest) (driver.CapabilityResult, error) {
	o, err := observeDatabase(ctx, c, r.Identity)
	if err != nil {
		return driver.CapabilityResult{}, err
	}
	if o.Exists && o.Owner != r.EnvID {
		return driver.CapabilityResult{Category: "conflict", Message: fmt.Sprintf("database %s is not this environment's (%s): left in place", r.Identity, o.Owner)}, nil
	}
	ident := pgx.Identifier{r.Identity}.Sanitize()
	if o.Exists {
		if _, err := c.Exec(ctx, "DROP DATABASE IF EXISTS "+ident+" WITH (FORCE)"); err != nil {
			return driver.CapabilityResult{}, fmt.Errorf("postgres: drop database %s: %w", r.Identity, err)
		}
	}
	var roleComment *string
	err = c.QueryRow(ctx, `SELECT shobj_description(oid, 'pg_authid') FROM pg_roles WHERE rolname = $1`, r.Identity).Scan(&roleComment)
	if err == nil {
		if env, _, ok := owner(deref(roleComment)); ok && env == r.EnvID {
			if _, err := c.Exec(ctx, "DROP ROLE IF EXISTS "+ident); err != nil {
				return driver.CapabilityResult{}, fmt.Errorf("postgres: drop role %s: %w", r.Identity, err)
			}
		}
	} else if !errors.Is(err, pgx.ErrNoRows) {
		return driver.CapabilityResult{}, fmt.Errorf("postgres: role %s: %w", r.Identity, err)
	}
	o, err = observeDatabase(ctx, c, r.Identity)
	return observed(o, err)
}

// connectTo connects to database name with the admin's credentials.
func (d *Data) connectTo(ctx context.Context, name string) (*pgx.Conn, error) {
	u, err := url.Parse(d.Admin)
	if err != nil {
		return nil, fmt.Errorf("postgres: admin DSN: %w", err)
	}
	u.Path = "/" + name
	return pgx.Connect(ctx, u.String())
}

// observeMigrations reads the ledger inside the database, against the
// migrations this driver knows (E4: a migration committed whose client
// was cut off is found applied here).
func (d *Data) observeMigrations(ctx context.Context, admin *pgx.Conn, name string) (*driver.CapabilityObservation, error) {
	db, err := observeDatabase(ctx, admin, name)
	if err != nil || !db.Exists {
		return &driver.CapabilityObservation{}, err
	}
	c, err := d.connectTo(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("postgres: connect %s: %w", name, err)
	}
	defer c.Close(context.WithoutCancel(ctx))
	ledger, err := readLedger(ctx, c)
	if err != nil || len(ledger) == 0 {
		return &driver.CapabilityObservation{}, err
	}
	want := make([]string, len(d.Migrations))
	for i, m := range d.Migrations {
		want[i] = m.ID
	}
	return &driver.CapabilityObservation{Exists: true, Owner: db.Owner, Matches: strings.Join(ledger, ",") == strings.Join(want, ","),
		ProviderID: name, Detail: "ledger " + strings.Join(ledger, ",")}, nil
}

// readLedger is the applied migration ids, in the order applied; none if
// the ledger was never made.
func readLedger(ctx context.Context, c *pgx.Conn) ([]string, error) {
	var exists bool
	if err := c.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, ledgerTable).Scan(&exists); err != nil {
		return nil, fmt.Errorf("postgres: ledger: %w", err)
	}
	if !exists {
		return nil, nil
	}
	rows, err := c.Query(ctx, "SELECT id FROM "+ledgerTable+" ORDER BY seq")
	if err != nil {
		return nil, fmt.Errorf("postgres: ledger: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("postgres: ledger: %w", err)
	}
	return ids, nil
}

// migrate runs the migrations the ledger does not hold, each in one
// transaction with its ledger row and as the database's own role, so
// that the application owns what they make. Run again after a lost
// answer, it runs nothing twice.
func (d *Data) migrate(ctx context.Context, admin *pgx.Conn, r driver.CapabilityRequest) (driver.CapabilityResult, error) {
	db, err := observeDatabase(ctx, admin, r.Identity)
	if err != nil {
		return driver.CapabilityResult{}, err
	}
	if !db.Exists || db.Owner != r.EnvID {
		return driver.CapabilityResult{Category: "transient", Message: fmt.Sprintf("no database %s of this environment to migrate", r.Identity)}, nil
	}
	c, err := d.connectTo(ctx, r.Identity)
	if err != nil {
		return driver.CapabilityResult{}, fmt.Errorf("postgres: connect %s: %w", r.Identity, err)
	}
	defer c.Close(context.WithoutCancel(ctx))
	role := pgx.Identifier{r.Identity}.Sanitize()
	if _, err := c.Exec(ctx, "SET ROLE "+role+"; CREATE TABLE IF NOT EXISTS "+ledgerTable+
		" (seq bigserial PRIMARY KEY, id text NOT NULL UNIQUE, applied_at timestamptz NOT NULL DEFAULT now())"); err != nil {
		return driver.CapabilityResult{}, fmt.Errorf("postgres: ledger in %s: %w", r.Identity, err)
	}
	applied, err := readLedger(ctx, c)
	if err != nil {
		return driver.CapabilityResult{}, err
	}
	done := map[string]bool{}
	for _, id := range applied {
		done[id] = true
	}
	for _, m := range d.Migrations {
		if done[m.ID] {
			continue
		}
		if err := runMigration(ctx, c, m); err != nil {
			return driver.CapabilityResult{Category: "configuration", Message: fmt.Sprintf("migration %s failed and was rolled back: %v", m.ID, err)}, nil
		}
	}
	o, err := d.observeMigrations(ctx, admin, r.Identity)
	return observed(o, err)
}

func runMigration(ctx context.Context, c *pgx.Conn, m Migration) error {
	return pgx.BeginFunc(ctx, c, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, m.SQL); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, "INSERT INTO "+ledgerTable+" (id) VALUES ($1)", m.ID)
		return err
	})
}

// unmigrate removes what the migrations made (every object the
// database's role owns there, the ledger with them); the database stays.
func (d *Data) unmigrate(ctx context.Context, admin *pgx.Conn, r driver.CapabilityRequest) (driver.CapabilityResult, error) {
	db, err := observeDatabase(ctx, admin, r.Identity)
	if err != nil {
		return driver.CapabilityResult{}, err
	}
	if !db.Exists {
		return driver.CapabilityResult{OK: true, Observation: &driver.CapabilityObservation{}}, nil
	}
	if db.Owner != r.EnvID {
		return driver.CapabilityResult{Category: "conflict", Message: fmt.Sprintf("database %s is not this environment's (%s): left in place", r.Identity, db.Owner)}, nil
	}
	c, err := d.connectTo(ctx, r.Identity)
	if err != nil {
		return driver.CapabilityResult{}, fmt.Errorf("postgres: connect %s: %w", r.Identity, err)
	}
	defer c.Close(context.WithoutCancel(ctx))
	if _, err := c.Exec(ctx, "DROP OWNED BY "+pgx.Identifier{r.Identity}.Sanitize()); err != nil {
		return driver.CapabilityResult{}, fmt.Errorf("postgres: drop what %s owns: %w", r.Identity, err)
	}
	o, err := d.observeMigrations(ctx, admin, r.Identity)
	return observed(o, err)
}

// URL is an environment's connection string: its role, its database, on
// the admin's server (the application's DATABASE_URL, P6).
func (d *Data) URL(env string) string {
	u, err := url.Parse(d.Admin)
	if err != nil {
		return ""
	}
	u.User = url.User("db-" + env)
	u.Path = "/db-" + env
	return u.String()
}
