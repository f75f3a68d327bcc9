#!/bin/sh
# Asks warden for a pull request's preview environment, or for its removal
# (docs/rules/workflow.md W7); ../workflows/preview.yml runs it.
#
#   preview.sh create          pr-<number>-<head sha7> for the head commit
#   preview.sh remove          the head commit's preview
#   preview.sh remove-before   the previous head's preview (after a push)
#
# Environment: PR_NUMBER, PR_BRANCH, HEAD_SHA, BEFORE_SHA (remove-before),
# PREVIEW_TTL (default 72h), WARDEN_URL and WARDEN_OPERATOR_TOKEN (read by
# `warden create environment`), WARDEN_BIN (default: warden on the PATH).
set -eu
what=${1:?usage: preview.sh create|remove|remove-before}
warden=${WARDEN_BIN:-warden}
: "${PR_NUMBER:?PR_NUMBER is not set}"

# id_for names the preview of one head commit.
id_for() { printf 'pr-%s-%s' "$PR_NUMBER" "$(printf '%s' "$1" | cut -c1-7 | tr '[:upper:]' '[:lower:]')"; }

# Warden's names are [a-z0-9][a-z0-9-]{0,62}: a branch like
# "Feature/Search_v2" becomes "feature-search-v2".
branch=$(printf '%s' "${PR_BRANCH:-}" | tr '[:upper:]' '[:lower:]' | tr -c 'a-z0-9\n' '-' | sed 's/^-*//; s/-*$//' | cut -c1-63)

case $what in
create)
	: "${HEAD_SHA:?HEAD_SHA is not set}"
	"$warden" create environment "$(id_for "$HEAD_SHA")" --branch "${branch:?PR_BRANCH has no usable characters}" \
		--revision "$HEAD_SHA" --ttl "${PREVIEW_TTL:-72h}" --if-absent
	;;
remove)
	: "${HEAD_SHA:?HEAD_SHA is not set}"
	"$warden" remove environment "$(id_for "$HEAD_SHA")" --reason "pull request #$PR_NUMBER closed" --if-present
	;;
remove-before)
	: "${BEFORE_SHA:?BEFORE_SHA is not set}"
	"$warden" remove environment "$(id_for "$BEFORE_SHA")" --reason "superseded by a push to #$PR_NUMBER" --if-present
	;;
*)
	echo "preview.sh: unknown command $what (create, remove, remove-before)" >&2
	exit 2
	;;
esac
