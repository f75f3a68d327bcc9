package httpapi

import (
	"errors"
	"net/http"

	"github.com/wardenhq/warden/actors/errs"
	"github.com/wardenhq/warden/persistence"
)

// refusal is every way the API says no: the domain's error classes
// (errs.Class), the HTTP layer's own (a credential, a body, a method, a
// node that does not own the entity) and the store's (S2, S7, S9). Each
// becomes an answer in one table, answers; nothing else writes an error's
// status.
type refusal uint8

const (
	internal refusal = iota
	invalidRequest
	notFound
	conflict
	forbidden
	idempotencyKeyReused
	overloaded
	unavailable
	moving

	unauthenticated
	rateLimited
	notOwner
	tooLarge
	unsupportedMediaType
	methodNotAllowed

	storageCorrupt
	storageUnavailable
	storageLow

	refusals // how many there are
)

// answer is a status code, a code word and, for the retryable ones, a
// Retry-After.
type answer struct {
	status     int
	code       string
	retryAfter string
}

// answers is the one place a refusal becomes a status code, a code word
// and, for the retryable ones, a Retry-After (docs/rules/http-api.md
// "Errors").
var answers = [refusals]answer{
	internal:             {http.StatusInternalServerError, "internal", ""},
	invalidRequest:       {http.StatusBadRequest, "invalid_request", ""},
	notFound:             {http.StatusNotFound, "not_found", ""},
	conflict:             {http.StatusConflict, "conflict", ""},
	forbidden:            {http.StatusForbidden, "forbidden", ""},
	idempotencyKeyReused: {http.StatusConflict, "idempotency_key_reused", ""},
	overloaded:           {http.StatusServiceUnavailable, "overloaded", "1"},
	unavailable:          {http.StatusServiceUnavailable, "unavailable", "5"},
	moving:               {http.StatusServiceUnavailable, "shard_moving", "1"},
	unauthenticated:      {http.StatusUnauthorized, "unauthorized", ""},
	rateLimited:          {http.StatusTooManyRequests, "too_many_requests", "60"},
	notOwner:             {http.StatusConflict, "not_owner", ""},
	tooLarge:             {http.StatusRequestEntityTooLarge, "too_large", ""},
	unsupportedMediaType: {http.StatusUnsupportedMediaType, "unsupported_media_type", ""},
	methodNotAllowed:     {http.StatusMethodNotAllowed, "method_not_allowed", ""},
	storageCorrupt:       {http.StatusInternalServerError, "storage_corrupt", ""},
	storageUnavailable:   {http.StatusServiceUnavailable, "storage_unavailable", "10"},
	storageLow:           {http.StatusInsufficientStorage, "storage_low", "60"},
}

// ofClass is the refusal of each of the domain's error classes.
var ofClass = map[errs.Class]refusal{
	errs.Other:                internal,
	errs.Invalid:              invalidRequest,
	errs.NotFound:             notFound,
	errs.Conflict:             conflict,
	errs.Forbidden:            forbidden,
	errs.IdempotencyKeyReused: idempotencyKeyReused,
	errs.Overloaded:           overloaded,
	errs.Unavailable:          unavailable,
	errs.Moving:               moving,
}

// refusalOf classifies err. The store's own refusals come first: a
// storage failure inside an actor's answer is wrapped as unavailable too,
// and its cause is what the caller must hear. The store knows no error
// kinds (it imports nothing of actors), so its not-found is read here.
func refusalOf(err error) refusal {
	var f *persistence.Failure
	switch {
	case errors.As(err, &f) && f.Cause == persistence.Corrupted:
		return storageCorrupt
	case f != nil:
		return storageUnavailable
	case errors.Is(err, persistence.ErrStorageLow):
		return storageLow
	case errors.Is(err, persistence.ErrNotFound):
		return notFound
	}
	return ofClass[errs.ClassOf(err)]
}

// status is a refusal's status code, for a page (the console's) that
// answers with HTML rather than an error body.
func (r refusal) status() int { return answers[r].status }
