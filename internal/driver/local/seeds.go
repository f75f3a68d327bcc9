package local

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/wardenhq/warden/actors/errs"
	"github.com/wardenhq/warden/internal/driver"
)

// A seed is a template database made once, from the application's
// migrations and a SQL file of data: seed-<name>, owned by the admin, what
// is in it owned by a role of the same name, closed to connections and
// marked with the seed's name and the fingerprint of what made it. A
// preview's database made from it is a copy at the speed of a file copy
// (CREATE DATABASE ... TEMPLATE), its objects handed to the preview's
// role, its migrations then run forward from the ledger the seed holds.

// MaxSeedSQL bounds a seed's SQL file: a seed is data a team chose, and a
// dump larger than this is a backup, not a seed.
const MaxSeedSQL = 256 << 20

// seedPrefix names a seed's database and role.
const seedPrefix = "seed-"

// Seed is a seed as the platform holds it; its previews are the
// environments whose databases were copied from it and are still there.
type Seed = driver.Seed

// SeedFingerprint is what a seed is made from, hashed: the migrations'
// ids and SQL, in order, then the seed's SQL.
func SeedFingerprint(migrations []Migration, sql string) string {
	h := sha256.New()
	for _, m := range migrations {
		fmt.Fprintf(h, "%d:%s%d:%s", len(m.ID), m.ID, len(m.SQL), m.SQL)
	}
	fmt.Fprintf(h, "%d:%s", len(sql), sql)
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// seedMark is a seed database's comment: making while it is filled (a
// crash then leaves one that is made again), made once it is complete.
func seedMark(name, fingerprint string, made bool) string {
	state := "making"
	if made {
		state = "made"
	}
	return fmt.Sprintf("warden seed=%s fingerprint=%s state=%s", name, fingerprint, state)
}

var seedMarkRE = regexp.MustCompile(`^warden seed=(\S+) fingerprint=([0-9a-f]+) state=(making|made)$`)

// seedState is a seed database as observed: absent, unmarked (someone
// else's), half made, or made from fingerprint.
type seedState struct {
	exists, marked, made bool
	fingerprint          string
}

func observeSeed(ctx context.Context, c *pgx.Conn, name string) (seedState, error) {
	var comment *string
	err := c.QueryRow(ctx, `SELECT shobj_description(oid, 'pg_database') FROM pg_database WHERE datname = $1`, seedPrefix+name).Scan(&comment)
	if errors.Is(err, pgx.ErrNoRows) {
		return seedState{}, nil
	}
	if err != nil {
		return seedState{}, fmt.Errorf("postgres: observe seed %s: %w", name, err)
	}
	m := seedMarkRE.FindStringSubmatch(deref(comment))
	if m == nil || m[1] != name {
		return seedState{exists: true}, nil
	}
	return seedState{exists: true, marked: true, made: m[3] == "made", fingerprint: m[2]}, nil
}

// validSeedName: a seed's name makes the names of its database and role.
func validSeedName(name string) bool { return validName(seedPrefix + name) }

// MakeSeed makes the seed name from the driver's migrations and sql,
// once: a seed already made from the same is left as it is, one made from
// something else is refused (remove it first), one a crash left half made
// is made again, and a same-name database without warden's mark is never
// touched.
func (d *Data) MakeSeed(ctx context.Context, name, sql string) (Seed, error) {
	if !validSeedName(name) {
		return Seed{}, fmt.Errorf("%w: seed name %q: lower-case letters, digits and '-', at most %d", errs.Invalid, name, 63-len(seedPrefix))
	}
	if len(sql) > MaxSeedSQL {
		return Seed{}, fmt.Errorf("%w: seed %s: %d bytes of SQL, at most %d", errs.Invalid, name, len(sql), MaxSeedSQL)
	}
	fp := SeedFingerprint(d.Migrations, sql)
	admin, err := pgx.Connect(ctx, d.Admin)
	if err != nil {
		return Seed{}, fmt.Errorf("%w: postgres: %w", errs.Unavailable, err)
	}
	defer admin.Close(context.WithoutCancel(ctx))
	st, err := observeSeed(ctx, admin, name)
	switch {
	case err != nil:
		return Seed{}, err
	case st.exists && !st.marked:
		return Seed{}, fmt.Errorf("%w: database %s%s exists without warden's mark: left in place", errs.Conflict, seedPrefix, name)
	case st.made && st.fingerprint == fp:
		return Seed{Name: name, Fingerprint: fp}, nil
	case st.made:
		return Seed{}, fmt.Errorf("%w: seed %s exists, made from something else (fingerprint %s, not %s): remove it first", errs.Conflict, name, st.fingerprint, fp)
	case st.exists: // half made: a crash came while it was filled
		if err := dropSeedDatabase(ctx, admin, name); err != nil {
			return Seed{}, err
		}
	}
	if err := d.fillSeed(ctx, admin, name, fp, sql); err != nil {
		return Seed{}, err
	}
	return Seed{Name: name, Fingerprint: fp}, nil
}

// fillSeed creates the seed's role and database, runs the migrations and
// the seed's SQL in it as the role, then closes it to connections and
// marks it made. A seed that fails to fill is removed: a failed SQL file
// leaves nothing behind.
func (d *Data) fillSeed(ctx context.Context, admin *pgx.Conn, name, fp, sql string) error {
	err := d.fillSeedOnce(ctx, admin, name, fp, sql)
	if err != nil {
		if rmErr := dropSeed(ctx, admin, name); rmErr != nil {
			err = fmt.Errorf("%w (and left half made: %v)", err, rmErr)
		}
	}
	return err
}

func (d *Data) fillSeedOnce(ctx context.Context, admin *pgx.Conn, name, fp, sql string) error {
	ident := pgx.Identifier{seedPrefix + name}.Sanitize()
	var role int
	if err := admin.QueryRow(ctx, `SELECT count(*) FROM pg_roles WHERE rolname = $1`, seedPrefix+name).Scan(&role); err != nil {
		return fmt.Errorf("postgres: seed role %s: %w", name, err)
	}
	if role == 0 {
		if _, err := admin.Exec(ctx, "CREATE ROLE "+ident+" NOLOGIN"); err != nil {
			return fmt.Errorf("postgres: create seed role %s: %w", name, err)
		}
	}
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+ident); err != nil {
		return fmt.Errorf("postgres: create seed %s: %w", name, err)
	}
	if _, err := admin.Exec(ctx, "COMMENT ON DATABASE "+ident+" IS "+quoteLiteral(seedMark(name, fp, false))); err != nil {
		return fmt.Errorf("postgres: mark seed %s: %w", name, err)
	}
	c, err := d.connectTo(ctx, seedPrefix+name)
	if err != nil {
		return fmt.Errorf("postgres: connect seed %s: %w", name, err)
	}
	err = d.runSeed(ctx, c, ident, sql)
	c.Close(context.WithoutCancel(ctx))
	if err != nil {
		return fmt.Errorf("seed %s: %w", name, err)
	}
	if _, err := admin.Exec(ctx, "ALTER DATABASE "+ident+" WITH IS_TEMPLATE true ALLOW_CONNECTIONS false"); err != nil {
		return fmt.Errorf("postgres: close seed %s: %w", name, err)
	}
	if _, err := admin.Exec(ctx, "COMMENT ON DATABASE "+ident+" IS "+quoteLiteral(seedMark(name, fp, true))); err != nil {
		return fmt.Errorf("postgres: mark seed %s made: %w", name, err)
	}
	return nil
}

// runSeed fills a seed as its role: the ledger and the migrations, each
// in one transaction with its ledger row as a preview's are, then the
// seed's SQL in one transaction.
func (d *Data) runSeed(ctx context.Context, c *pgx.Conn, role, sql string) error {
	if _, err := c.Exec(ctx, "GRANT CREATE, USAGE ON SCHEMA public TO "+role+"; SET ROLE "+role+"; CREATE TABLE "+ledgerTable+
		" (seq bigserial PRIMARY KEY, id text NOT NULL UNIQUE, applied_at timestamptz NOT NULL DEFAULT now())"); err != nil {
		return fmt.Errorf("ledger: %w", err)
	}
	for _, m := range d.Migrations {
		if err := runMigration(ctx, c, m); err != nil {
			return fmt.Errorf("migration %s: %w", m.ID, err)
		}
	}
	if err := pgx.BeginFunc(ctx, c, func(tx pgx.Tx) error { _, err := tx.Exec(ctx, sql); return err }); err != nil {
		return fmt.Errorf("%w: its SQL failed and was rolled back: %w", errs.Invalid, err)
	}
	return nil
}

// RemoveSeed removes a seed made by warden: its database and role. The
// previews copied from it keep their data (they are copies).
func (d *Data) RemoveSeed(ctx context.Context, name string) error {
	if !validSeedName(name) {
		return fmt.Errorf("%w: seed name %q is not one warden makes", errs.Invalid, name)
	}
	admin, err := pgx.Connect(ctx, d.Admin)
	if err != nil {
		return fmt.Errorf("postgres: %w", err)
	}
	defer admin.Close(context.WithoutCancel(ctx))
	st, err := observeSeed(ctx, admin, name)
	switch {
	case err != nil:
		return err
	case st.exists && !st.marked:
		return fmt.Errorf("%w: database %s%s exists without warden's mark: left in place", errs.Conflict, seedPrefix, name)
	}
	return dropSeed(ctx, admin, name)
}

// dropSeed drops a seed's database, if there, and its role.
func dropSeed(ctx context.Context, c *pgx.Conn, name string) error {
	ident := pgx.Identifier{seedPrefix + name}.Sanitize()
	var exists bool
	if err := c.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)`, seedPrefix+name).Scan(&exists); err != nil {
		return fmt.Errorf("postgres: seed %s: %w", name, err)
	}
	if exists {
		if err := dropSeedDatabase(ctx, c, name); err != nil {
			return err
		}
	}
	if _, err := c.Exec(ctx, "DROP ROLE IF EXISTS "+ident); err != nil {
		return fmt.Errorf("postgres: drop seed role %s: %w", name, err)
	}
	return nil
}

func dropSeedDatabase(ctx context.Context, c *pgx.Conn, name string) error {
	ident := pgx.Identifier{seedPrefix + name}.Sanitize()
	if _, err := c.Exec(ctx, "ALTER DATABASE "+ident+" WITH IS_TEMPLATE false"); err != nil {
		return fmt.Errorf("postgres: open seed %s: %w", name, err)
	}
	if _, err := c.Exec(ctx, "DROP DATABASE "+ident+" WITH (FORCE)"); err != nil {
		return fmt.Errorf("postgres: drop seed %s: %w", name, err)
	}
	return nil
}

// Seeds lists the seeds warden made, each with the previews' databases
// copied from it, by name.
func (d *Data) Seeds(ctx context.Context) ([]Seed, error) {
	admin, err := pgx.Connect(ctx, d.Admin)
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	defer admin.Close(context.WithoutCancel(ctx))
	rows, err := admin.Query(ctx, `SELECT datname, coalesce(shobj_description(oid, 'pg_database'), '') FROM pg_database ORDER BY datname`)
	if err != nil {
		return nil, fmt.Errorf("postgres: seeds: %w", err)
	}
	type db struct{ name, comment string }
	dbs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (db, error) {
		var x db
		return x, r.Scan(&x.name, &x.comment)
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: seeds: %w", err)
	}
	var seeds []Seed
	at := map[string]int{}
	for _, x := range dbs {
		if m := seedMarkRE.FindStringSubmatch(x.comment); m != nil && m[3] == "made" && x.name == seedPrefix+m[1] {
			at[m[1]] = len(seeds)
			seeds = append(seeds, Seed{Name: m[1], Fingerprint: m[2], Previews: []string{}})
		}
	}
	for _, x := range dbs {
		if env, _, seed, ok := ownerAndSeed(x.comment); ok && seed != "" {
			if i, found := at[seed]; found {
				seeds[i].Previews = append(seeds[i].Previews, env)
			}
		}
	}
	return seeds, nil
}

// fromSeed makes the preview's database a copy of the seed its request
// names (or, after a crash, finds the copy made) and hands it what the
// seed's role owned; it returns the seed's fingerprint for the mark, or a
// result that says why not (a missing seed, one in use).
func (d *Data) fromSeed(ctx context.Context, c *pgx.Conn, r driver.CapabilityRequest, exists bool) (*driver.CapabilityResult, string, error) {
	if !validSeedName(r.DataFrom) {
		return &driver.CapabilityResult{Category: "configuration", Message: fmt.Sprintf("seed name %q is not one warden makes", r.DataFrom)}, "", nil
	}
	st, err := observeSeed(ctx, c, r.DataFrom)
	if err != nil {
		return nil, "", err
	}
	if !exists {
		if res, err := copySeed(ctx, c, r, st); res != nil || err != nil {
			return res, "", err
		}
	}
	fp := st.fingerprint
	if fp == "" {
		fp = unknownFingerprint // the copy was made before a crash; its seed has gone since
	}
	return nil, fp, d.handOver(ctx, r)
}

// copySeed makes a preview's database a copy of the seed, owned by the
// preview's role: a missing seed, or one in use, is a result that says so.
func copySeed(ctx context.Context, c *pgx.Conn, r driver.CapabilityRequest, st seedState) (*driver.CapabilityResult, error) {
	if !st.made {
		return &driver.CapabilityResult{Category: "configuration", Message: fmt.Sprintf("seed %s does not exist on the platform: make it first", r.DataFrom)}, nil
	}
	// FILE_COPY copies the seed's files after a checkpoint; PostgreSQL 15's
	// default (WAL_LOG) writes every block through the WAL instead, which
	// was slower for a seed of 100,000 rows (BENCHMARKS.md, "A preview's
	// data from a seed").
	ident := pgx.Identifier{r.Identity}.Sanitize()
	_, err := c.Exec(ctx, "CREATE DATABASE "+ident+" OWNER "+ident+" TEMPLATE "+pgx.Identifier{seedPrefix + r.DataFrom}.Sanitize()+" STRATEGY FILE_COPY")
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "55006" { // object_in_use: the seed has a connection
		return &driver.CapabilityResult{Category: "transient", Message: fmt.Sprintf("seed %s is in use by another connection: copied once it is not (%s)", r.DataFrom, pgErr.Message)}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("postgres: copy seed %s to %s: %w", r.DataFrom, r.Identity, err)
	}
	return nil, nil
}

// handOver gives the preview's role what the seed's role owned in its
// copy, and takes the seed role's grants there away; again after a crash,
// it finds nothing left to hand. A seed role that is gone owns nothing
// anywhere (a role that owns objects cannot be dropped).
func (d *Data) handOver(ctx context.Context, r driver.CapabilityRequest) error {
	c, err := d.connectTo(ctx, r.Identity)
	if err != nil {
		return fmt.Errorf("postgres: connect %s: %w", r.Identity, err)
	}
	defer c.Close(context.WithoutCancel(ctx))
	var role bool
	if err := c.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = $1)`, seedPrefix+r.DataFrom).Scan(&role); err != nil || !role {
		return err
	}
	seedRole := pgx.Identifier{seedPrefix + r.DataFrom}.Sanitize()
	if _, err := c.Exec(ctx, "REASSIGN OWNED BY "+seedRole+" TO "+pgx.Identifier{r.Identity}.Sanitize()+"; DROP OWNED BY "+seedRole); err != nil {
		return fmt.Errorf("postgres: hand %s's objects to %s: %w", r.DataFrom, r.Identity, err)
	}
	return nil
}

// seedOf is the " seed=... fingerprint=..." part of a preview database's
// mark, "" for one made empty.
func seedOf(seed, fingerprint string) string {
	if seed == "" {
		return ""
	}
	return " seed=" + seed + " fingerprint=" + fingerprint
}

// seedWord says, in an observation's detail (and so in the receipt of
// the step it verifies), which seed a database was copied from and what
// that seed was made from.
func seedWord(seed, fingerprint string) string {
	switch {
	case seed == "":
		return ""
	case fingerprint == unknownFingerprint:
		return ", from seed " + seed + " (removed before this copy was marked: what it was made from is not known)"
	}
	return ", from seed " + seed + " (fingerprint " + fingerprint + ")"
}

// unknownFingerprint marks a copy whose seed was gone before the copy was
// marked (a crash between the two): a fingerprint no seed has.
const unknownFingerprint = "0"
