#!/usr/bin/env bash
# payments.sh: a tiny payments client, not written in Go, that records what it asked and
# what it was told as an indoubt history, so that `indoubt check` can judge it.
#
# It applies N payments of 1, each under its own id p-1 .. p-N, with psql through the
# address in DSN (indoubt proxy's, in the README's example), retrying any attempt whose
# connection was lost. Naive, a retry inserts the payment again; with --idempotent the
# payment id is recorded as an idempotency key in the same statement, and a retry that
# finds it changes nothing. At the end it reads how many times each payment is present,
# directly from FINAL_DSN (the server, not the proxy), as the history's final read.
#
# Usage: indoubt exec ... -- payments.sh [--idempotent] N
#        DSN=... [FINAL_DSN=...] [PGPASSWORD=...] payments.sh [--idempotent] N HISTORY
#
# Under indoubt exec it needs nothing more: DSN defaults to DATABASE_URL (the proxy's
# address), FINAL_DSN to INDOUBT_DIRECT_URL (the server's own) and HISTORY to
# INDOUBT_HISTORY.
#
# The history (JSON lines, schemas/history.schema.json; model exactly-once) has, per
# payment, an invoke and one completion: ok (applied, or found already applied:
# "replayed"), fail (the server refused it), or info (every attempt lost its connection:
# unknown). Each line names the connection it used, the client's local address as the
# proxy sees it (found with ss, from iproute2), and its time in Unix nanoseconds, so
# that `indoubt check --faults` can join the proxy's events to the operations they hit.
set -euo pipefail
# A write to a psql whose connection was just cut must fail, not kill the script.
trap '' PIPE

idempotent=0
if [[ ${1:-} == --idempotent ]]; then
	idempotent=1
	shift
fi
DSN=${DSN:-${DATABASE_URL:-}}
if [[ $# -lt 1 || $# -gt 2 || -z $DSN || -z ${2:-${INDOUBT_HISTORY:-}} ]]; then
	echo "usage: DSN=postgres://... [FINAL_DSN=...] $0 [--idempotent] N HISTORY (or under indoubt exec: $0 [--idempotent] N)" >&2
	exit 3
fi
n=$1
history=${2:-$INDOUBT_HISTORY}
final_dsn=${FINAL_DSN:-${INDOUBT_DIRECT_URL:-$DSN}}
max_attempts=${MAX_ATTEMPTS:-10}

# json_str writes $1 as a JSON string.
json_str() {
	local s=$1
	s=${s//\\/\\\\}
	s=${s//\"/\\\"}
	s=${s//$'\t'/ }
	s=${s//$'\r'/}
	s=${s//$'\n'/ }
	printf '"%s"' "$s"
}

index=0
# event TYPE F PROCESS OP_ID CONN [EXTRA]: append one history line.
event() {
	local extra=${6:-}
	if [[ -n $5 ]]; then
		extra=",\"conn\":\"$5\"$extra"
	fi
	printf '{"index":%d,"time":%s,"process":%d,"type":"%s","f":"%s","op_id":"%s"%s}\n' \
		"$index" "$(date +%s%N)" "$3" "$1" "$2" "$4" "$extra" >>"$history"
	index=$((index + 1))
}

# One psql session at a time, as a coprocess: it keeps its connection until the proxy
# cuts it, and psql exits when its connection is lost. Its pipes are duplicated (to,
# from) because bash closes a coprocess's own as soon as it exits, output unread.
conn=""
pid=""
to=""
from=""
connect() {
	if [[ -n $pid ]]; then
		return
	fi
	coproc PSQL { exec psql -X -A -t "$DSN" 2>&1; }
	pid=$PSQL_PID
	exec {to}>&"${PSQL[1]}" {from}<&"${PSQL[0]}"
	echo '\echo __READY__' >&"$to"
	local line=""
	IFS= read -r -t 10 line <&"$from" || true
	if [[ $line != __READY__ ]]; then
		echo "payments.sh: psql could not connect: $line" >&2
		exit 3
	fi
	conn=$(ss -Htnp state established | awk -v p="pid=$pid," 'index($0, p) { print $3; exit }')
}

# disconnect forgets the session whose connection was lost.
disconnect() {
	wait "$pid" 2>/dev/null || true
	exec {to}>&- {from}<&-
	pid=""
}

# attempt SQL: run one statement; sets out (psql's lines) and returns 0 when psql
# answered, 1 when the connection was lost before it could.
attempt() {
	out=""
	local line
	if { echo "$1" && echo '\echo __END__'; } >&"$to" 2>/dev/null; then
		while IFS= read -r -t 10 line <&"$from"; do
			[[ $line == __END__ ]] && return 0
			out+="$line"$'\n'
		done
	fi
	disconnect
	return 1
}

psql -X -q -v ON_ERROR_STOP=1 "$final_dsn" <<'SQL'
SET client_min_messages TO warning;
CREATE TABLE IF NOT EXISTS payments (tag text NOT NULL, amount int NOT NULL);
CREATE TABLE IF NOT EXISTS payment_keys (key text PRIMARY KEY);
TRUNCATE payments, payment_keys;
SQL

# A header already there (indoubt exec --model wrote it) stays.
if [[ ! -s $history ]]; then
	echo '{"header":{"format":"indoubt-history/1","workload":"payments","model":"exactly-once","store":"postgres","seed":0}}' >"$history"
fi
process=0
for i in $(seq 1 "$n"); do
	id="p-$i"
	if ((idempotent)); then
		sql="WITH k AS (INSERT INTO payment_keys (key) VALUES ('$id') ON CONFLICT DO NOTHING RETURNING key) INSERT INTO payments (tag, amount) SELECT key, 1 FROM k;"
	else
		sql="INSERT INTO payments (tag, amount) VALUES ('$id', 1);"
	fi
	connect
	event invoke apply "$process" "$id" "$conn"
	done=""
	err=""
	for a in $(seq 1 "$max_attempts"); do
		connect
		if attempt "$sql"; then
			if [[ $out == *ERROR:* ]]; then
				event fail apply "$process" "$id" "$conn" ",\"attempt\":$a,\"error\":$(json_str "${out%$'\n'}")"
			elif [[ $out == *"INSERT 0 0"* ]]; then
				event ok apply "$process" "$id" "$conn" ",\"attempt\":$a,\"value\":{\"replayed\":true}"
			else
				event ok apply "$process" "$id" "$conn" ",\"attempt\":$a"
			fi
			done=1
			break
		fi
		err=${out%$'\n'}
		sleep 0.05
	done
	if [[ -z $done ]]; then
		event info apply "$process" "$id" "$conn" ",\"attempt\":$max_attempts,\"error\":$(json_str "$err")"
		process=$((process + 1)) # a process whose operation ended unknown never invokes again
	fi
done
if [[ -n $pid ]]; then
	echo '\q' >&"$to" || true
	disconnect
fi

event invoke read 1000 final ""
state=$(psql -X -A -t -v ON_ERROR_STOP=1 "$final_dsn" -c \
	"SELECT coalesce(json_object_agg(tag, n), '{}') FROM (SELECT tag, count(*) AS n FROM payments GROUP BY tag) s")
event ok read 1000 final "" ",\"value\":$state"
