#!/bin/sh
# One marquee action against a Terraform root, calling warden back as it
# goes (docs/rules/workflow.md W4, W5). The GitHub workflow (../workflows/marquee.yml)
# runs this script; so do `make run` (when terraform is on the PATH) and the
# end-to-end test, so the steps that run in CI are the steps that are
# tested.
#
#   provision.sh apply|redeploy   create or replace the host, then `deployed`
#   provision.sh destroy          tear it down, then `destroyed`
#   provision.sh check            a scheduled look: `null` when the state
#                                 holds no infrastructure at all
#
# Environment (the workflow maps its inputs to these):
#   WARDEN_CALLBACK_URL, WARDEN_MARQUEE_ID, WARDEN_GENERATION,
#   WARDEN_CALLBACK_TOKEN   read by `warden callback` (never on a command line)
#   WARDEN_TF_DIR           the Terraform root (default ../../terraform/local)
#   WARDEN_TF_WORK          where each marquee's working copy and local state
#                           live (default $RUNNER_TEMP or /tmp, /warden-tf)
#   WARDEN_BIN              the warden binary (default: warden on the PATH)
#
# A callback answered `stale` or `locked` (exit 3) means a newer run owns the
# marquee: this one stops quietly with status 0. Any other failure exits
# non-zero; the workflow's `if: failure()` step (on-failure.sh) reports it.
set -eu

action=${1:?usage: provision.sh apply|redeploy|destroy|check}
here=$(cd "$(dirname "$0")" && pwd)
tf_dir=${WARDEN_TF_DIR:-$here/../../terraform/local}
warden=${WARDEN_BIN:-warden}
: "${WARDEN_MARQUEE_ID:?WARDEN_MARQUEE_ID is not set}"
: "${WARDEN_GENERATION:?WARDEN_GENERATION is not set}"
work=${WARDEN_TF_WORK:-${RUNNER_TEMP:-/tmp}/warden-tf}/$WARDEN_MARQUEE_ID
stage_file=$work/stage

mkdir -p "$work"
chmod 700 "$work"

# stage records what is being done, for on-failure.sh's reason.
stage() { printf '%s\n' "$1" >"$stage_file"; }

# callback sends one callback; an obsolete run stops here, quietly.
callback() {
	set +e
	"$warden" callback "$@"
	rc=$?
	set -e
	case $rc in
	0) ;;
	3)
		echo "provision.sh: warden answered that this run is obsolete (a newer generation owns $WARDEN_MARQUEE_ID); stopping" >&2
		rm -f "$stage_file"
		exit 0
		;;
	*) exit "$rc" ;;
	esac
}

tf() { terraform -chdir="$work" "$@"; }

# The module is copied into the marquee's own directory, so runs for
# different marquees never share a .terraform directory or a state. In
# GitHub Actions a remote backend keeps the state between runs instead.
stage "preparing the Terraform working copy"
cp "$tf_dir"/*.tf "$work"/
stage "terraform init"
tf init -input=false -no-color >"$work/init.log"

vars="-var=marquee_id=$WARDEN_MARQUEE_ID -var=generation=$WARDEN_GENERATION"

case $action in
apply | redeploy)
	callback --verb step --step vm_starting
	stage "terraform apply"
	# shellcheck disable=SC2086 # $vars is two words on purpose
	tf apply -input=false -auto-approve -no-color $vars >"$work/apply.log"
	callback --verb step --step ssh_configuring
	stage "reading terraform outputs"
	outputs=$work/outputs.json
	(umask 077 && tf output -json >"$outputs")
	stage "reporting the connection"
	set +e
	"$warden" callback --verb deployed --connection-from "$outputs"
	rc=$?
	set -e
	rm -f "$outputs" # it holds the host's private key
	case $rc in
	0) ;;
	3) echo "provision.sh: this run is obsolete; stopping" >&2 ;;
	*) exit "$rc" ;;
	esac
	;;
destroy)
	stage "terraform destroy"
	# shellcheck disable=SC2086
	tf destroy -input=false -auto-approve -no-color $vars >"$work/destroy.log"
	callback --verb destroyed
	;;
check)
	stage "terraform state list"
	if [ -z "$(tf state list 2>/dev/null)" ]; then
		# Nothing is managed at all: the plan would create everything.
		callback --verb null
	fi
	;;
*)
	echo "provision.sh: unknown action $action (apply, redeploy, destroy, check)" >&2
	exit 2
	;;
esac
rm -f "$stage_file"
