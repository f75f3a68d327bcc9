#!/usr/bin/env bash
# make cluster: three warden nodes on this machine, each embedding an etcd
# member (docs/rules/cluster.md C10). HTTP on 127.0.0.1:8181, :8182, :8183; etcd
# clients on :2381-2383 and peers on :2391-2393; data under ./data/cluster.
# Ctrl-C stops all three.
#
# scripts/cluster.sh --etcd-only (make cluster-etcd) starts the three etcd
# members alone, without the nodes: what migrate copies a store into or
# out of (docs/guides/cluster.md, Moving to a cluster).
set -euo pipefail
ONLY=""
case "${1:-}" in
"") ;;
--etcd-only) ONLY=--etcd-only ;;
*)
	echo "usage: scripts/cluster.sh [--etcd-only]" >&2
	exit 2
	;;
esac
# Everything under the data directory is private (warden refuses a data
# directory others may read, and ./data is make run's too).
umask 077
BIN=${BIN:-./bin/warden}
PREVIEW="$(dirname "$BIN")/example-preview" # the nodes' preview driver, beside warden
DIR=${CLUSTER_DATA:-./data/cluster}
mkdir -p "$DIR"
# The shared keys and token, the cluster CA, each node's certificate for
# etcd's mutual TLS, and the operator's client certificate (admin.crt) for
# the commands that reach etcd themselves (docs/guides/cluster.md, Moving to a cluster).
for i in 1 2 3; do
	"$BIN" keygen "$DIR/shared" --node "n$i" --host 127.0.0.1,localhost
done
"$BIN" keygen "$DIR/shared" --client admin
INITIAL=n1=https://127.0.0.1:2391,n2=https://127.0.0.1:2392,n3=https://127.0.0.1:2393
pids=""
stop() {
	trap - INT TERM
	# shellcheck disable=SC2086 # one word per pid
	[ -n "$pids" ] && kill -TERM $pids 2>/dev/null
	wait
	# The preview applications the nodes' driver started stop with them,
	# as make run's do (nothing make cluster started listens after Ctrl-C).
	if [ -z "$ONLY" ] && [ -x "$PREVIEW" ]; then
		"$PREVIEW" stop
	fi
	exit 0
}
trap stop INT TERM
for i in 1 2 3; do
	# shellcheck disable=SC2086 # ONLY is one flag or none
	"$BIN" serve $ONLY --node "n$i" --listen "127.0.0.1:818$i" --data "$DIR/n$i" \
		--etcd-embed --etcd-peer-url "https://127.0.0.1:239$i" --etcd-client-url "https://127.0.0.1:238$i" \
		--etcd-initial-cluster "$INITIAL" \
		--etcd-cert-file "$DIR/shared/n$i.crt" --etcd-key-file "$DIR/shared/n$i.key" --etcd-ca-file "$DIR/shared/cluster-ca.crt" \
		--seal-key-file "$DIR/shared/seal.key" --callback-signing-key-file "$DIR/shared/callback-signing.key" \
		--cluster-token-file "$DIR/shared/cluster.token" \
		--dispatch exec --dispatch-command ./bin/example-workflow \
		--bootstrap exec --bootstrap-command "./bin/example-workflow bootstrap" \
		--env-driver-command "$PREVIEW" --env-reconcile-every 10s \
		--driver-env WARDEN_PREVIEW_DIR,WARDEN_EXAMPLE_SCRIPTS,WARDEN_BIN,WARDEN_TF_WORK,TF_CLI_CONFIG_FILE \
		> >(
			# Ctrl-C reaches the whole foreground group: the prefixing sed
			# ignores it and ends when its node does, so that the node's
			# last lines are not written into a closed pipe (which a Go
			# program dies of, SIGPIPE, before it has stopped cleanly).
			trap '' INT TERM
			exec sed "s/^/n$i: /"
		) 2>&1 &
	pids="$pids $!" # warden's own pid (the log prefix runs beside it), so a stop reaches it
done
if [ -n "$ONLY" ]; then
	echo "make cluster-etcd: etcd members n1 https://127.0.0.1:2381, n2 https://127.0.0.1:2382, n3 https://127.0.0.1:2383, no nodes (Ctrl-C stops all three)"
else
	echo "make cluster: n1 http://127.0.0.1:8181, n2 http://127.0.0.1:8182, n3 http://127.0.0.1:8183 (Ctrl-C stops all three)"
fi
wait
