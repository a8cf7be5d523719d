#!/usr/bin/env bash
# The quickstart, as a script: an app's first hour against a running IAM service, step by step.
#
#   Terminal 1:  EMAIL_BACKEND=django.core.mail.backends.filebased.EmailBackend make run
#   Terminal 2:  docs/quickstart.sh
#
# It signs up two people (Alice and Bob), confirms Alice's e-mail with the token from her confirmation
# mail, creates a workspace, a project, two permissions and a role, invites Bob by e-mail and accepts with
# the token from his invitation mail, registers a client whose webhook endpoint is a small receiver on
# loopback (docs/webhook_receiver.py, verifying with the official `standardwebhooks` package), validates
# Bob's token for that client, changes the role and waits for the verified `role.updated` push.
#
# Environment:
#   IAM_URL       the service (default http://127.0.0.1:8000)
#   IAM_MAIL_DIR  where the service writes e-mails with Django's file backend (default var/mail, which is
#                 EMAIL_FILE_PATH's default). In the Redis mode (REDIS_URL set) the worker sends the
#                 e-mails: start it with the same EMAIL_BACKEND.
#   QUICKSTART_VENV  the virtualenv for the receiver (default var/quickstart-venv; created, and
#                 `standardwebhooks` installed into it with pip, on first use)
# Needs bash, curl and python3. Exits non-zero at the first step that fails; stops what it started.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
IAM_URL="${IAM_URL:-http://127.0.0.1:8000}"
IAM_URL="${IAM_URL%/}"
MAIL_DIR="${IAM_MAIL_DIR:-$ROOT/var/mail}"
VENV="${QUICKSTART_VENV:-$ROOT/var/quickstart-venv}"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/iam-quickstart.XXXXXX")"
RUN="$(date +%s)-$$"  # makes this run's e-mail addresses and slug unique
RECEIVER_PID=""

cleanup() {
  if [[ -n "$RECEIVER_PID" ]]; then kill "$RECEIVER_PID" 2>/dev/null || true; wait "$RECEIVER_PID" 2>/dev/null || true; fi
  rm -rf "$WORK"
}
trap cleanup EXIT

step() { printf '\n== %s\n' "$*"; }
fail() { printf 'FAILED: %s\n' "$*" >&2; exit 1; }

# json FILE EXPR: a value out of a JSON file, EXPR being a Python expression on `d`.
json() { python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1" "$2"; }

# call PATH BODY [TOKEN] [WORKSPACE]: POST the JSON BODY; the answer lands in $WORK/answer.json. Fails the
# script unless the answer is 200 with `success: true`.
call() {
  local path="$1" body="$2" token="${3:-}" workspace="${4:-}"
  local args=(-sS -o "$WORK/answer.json" -w '%{http_code}' -X POST "$IAM_URL/$path"
              -H 'Content-Type: application/json' --data-binary "$body")
  [[ -n "$token" ]] && args+=(-H "Authorization: Bearer $token")
  [[ -n "$workspace" ]] && args+=(-H "X-Workspace: $workspace")
  printf '   POST /%s%s\n' "$path" "${workspace:+  (X-Workspace: $workspace)}"
  local status
  status="$(curl "${args[@]}")" || fail "POST /$path: no answer from $IAM_URL"
  if [[ "$status" != 200 ]] || [[ "$(json "$WORK/answer.json" 'd.get("success")')" != True ]]; then
    printf '   answer %s: %s\n' "$status" "$(cat "$WORK/answer.json")" >&2
    fail "POST /$path"
  fi
}

# mail_token ADDRESS LINK_PATH: the token of the newest e-mail to ADDRESS holding a link
# `.../LINK_PATH?token=...`, waiting up to 30 s for it (in the Redis mode a worker sends it).
mail_token() {
  python3 - "$MAIL_DIR" "$1" "$2" <<'PY'
import email, email.policy, pathlib, re, sys, time

mail_dir, address, link_path = pathlib.Path(sys.argv[1]), sys.argv[2].lower(), sys.argv[3]
pattern = re.compile(re.escape(link_path) + r"\?token=([A-Za-z0-9_.-]+)")
deadline = time.monotonic() + 30
while time.monotonic() < deadline:
    found = None
    # Django's file backend: one file per connection, messages separated by a line of 79 dashes.
    for path in sorted(mail_dir.glob("*.log"), key=lambda p: p.stat().st_mtime) if mail_dir.is_dir() else []:
        for raw in path.read_text(errors="replace").split("\n" + "-" * 79 + "\n"):
            if not raw.strip():
                continue
            message = email.message_from_string(raw.lstrip("\n"), policy=email.policy.default)
            if address not in str(message.get("To", "")).lower():
                continue
            body = message.get_body(("plain",))
            match = pattern.search(body.get_content() if body else "")
            if match:
                found = match.group(1)
    if found:
        print(found)
        sys.exit(0)
    time.sleep(0.5)
sys.exit(f"no e-mail to {address} with a /{link_path.lstrip('/')} link in {mail_dir} after 30 s")
PY
}

ALICE="alice+$RUN@example.com"
BOB="bob+$RUN@example.com"
PASSWORD="correct-horse-battery-$RUN"

step "0. The service answers at $IAM_URL"
curl -fsS "$IAM_URL/health-check" >/dev/null || fail "no service at $IAM_URL (start it with make run)"
echo "   healthy. E-mails: this script reads them from $MAIL_DIR, where the service writes them with"
echo "   Django's file backend (EMAIL_BACKEND=django.core.mail.backends.filebased.EmailBackend): the web"
echo "   process does in the embedded mode, the worker when REDIS_URL is set. With the default console"
echo "   backend they appear in make run's terminal (embedded mode) or in the worker's (REDIS_URL set)."

step "1. Alice and Bob sign up"
call auth/register "{\"email\": \"$ALICE\", \"password\": \"$PASSWORD\", \"name\": \"Alice\"}"
ALICE_ID="$(json "$WORK/answer.json" 'd["data"]["account"]["id"]')"
echo "   Alice: $ALICE_ID (verified: $(json "$WORK/answer.json" 'd["data"]["account"]["verified"]'))"
call auth/register "{\"email\": \"$BOB\", \"password\": \"$PASSWORD\", \"name\": \"Bob\"}"
BOB_ID="$(json "$WORK/answer.json" 'd["data"]["account"]["id"]')"
echo "   Bob:   $BOB_ID"

step "2. Alice confirms her e-mail address with the token from her confirmation mail"
if [[ ! -d "$MAIL_DIR" ]]; then
  echo "   $MAIL_DIR does not exist: is the service sending e-mail to files? Start it with" >&2
  echo "   EMAIL_BACKEND=django.core.mail.backends.filebased.EmailBackend make run" >&2
  echo "   (with the default console backend the e-mail is printed in make run's terminal, or in the" >&2
  echo "   worker's when REDIS_URL is set; a script cannot read it there)." >&2
fi
CONFIRM_TOKEN="$(mail_token "$ALICE" /confirm-email)" || fail "Alice's confirmation e-mail"
call auth/confirm "{\"token\": \"$CONFIRM_TOKEN\"}"
echo "   verified: $(json "$WORK/answer.json" 'd["data"]["verified"]')"

step "3. Alice logs in"
call auth/login "{\"email\": \"$ALICE\", \"password\": \"$PASSWORD\"}"
ALICE_TOKEN="$(json "$WORK/answer.json" 'd["data"]["access_token"]')"
echo "   access token: ${ALICE_TOKEN:0:24}... (60 minutes; refresh with the refresh token as Bearer)"

step "4. Alice creates a workspace (she becomes its owner)"
SLUG="acme-$RUN"
call workspace/create "{\"name\": \"Acme\", \"slug\": \"$SLUG\", \"description\": \"Quickstart workspace\",
  \"config\": {\"schema_version\": \"1\"}, \"tags\": [\"quickstart\"], \"meta\": {\"schema_version\": \"1\"}}" "$ALICE_TOKEN"
WORKSPACE_ID="$(json "$WORK/answer.json" 'd["data"]["id"]')"
echo "   workspace $SLUG: $WORKSPACE_ID"

step "5. A project, two permissions and a role in it"
call projects/create "{\"name\": \"Billing\", \"code\": \"billing\", \"config\": {\"schema_version\": \"1\"},
  \"tags\": [], \"meta\": {\"schema_version\": \"1\"}}" "$ALICE_TOKEN" "$SLUG"
PROJECT_ID="$(json "$WORK/answer.json" 'd["data"]["id"]')"
call permissions/create "{\"name\": \"invoices:read\", \"description\": \"Read invoices\",
  \"tags\": [], \"meta\": {\"schema_version\": \"1\"}}" "$ALICE_TOKEN" "$SLUG"
READ_ID="$(json "$WORK/answer.json" 'd["data"]["id"]')"
call permissions/create "{\"name\": \"invoices:write\", \"description\": \"Write invoices\",
  \"tags\": [], \"meta\": {\"schema_version\": \"1\"}}" "$ALICE_TOKEN" "$SLUG"
WRITE_ID="$(json "$WORK/answer.json" 'd["data"]["id"]')"
call roles/create "{\"name\": \"billing\", \"description\": \"Works on invoices\", \"permission_ids\": [\"$READ_ID\"],
  \"tags\": [], \"meta\": {\"schema_version\": \"1\"}}" "$ALICE_TOKEN" "$SLUG"
ROLE_ID="$(json "$WORK/answer.json" 'd["data"]["id"]')"
echo "   project $PROJECT_ID; role billing ($ROLE_ID) holds invoices:read"

step "6. Alice invites Bob by e-mail, with the role"
call invitations/create "{\"email\": \"$BOB\", \"scope\": \"workspace\", \"role_ids\": [\"$ROLE_ID\"]}" \
  "$ALICE_TOKEN" "$SLUG"
echo "   invitation $(json "$WORK/answer.json" 'd["data"]["id"]'): $(json "$WORK/answer.json" 'd["data"]["status"]')"

step "7. Bob accepts with the token from his invitation mail"
INVITE_TOKEN="$(mail_token "$BOB" /accept-invitation)" || fail "Bob's invitation e-mail"
# Bob never confirmed his address, so accepting also proves his mailbox: he sets a new password, every
# earlier session of his account ends, and the answer carries a new session.
call invitations/accept "{\"token\": \"$INVITE_TOKEN\", \"password\": \"$PASSWORD-bob\"}"
echo "   membership $(json "$WORK/answer.json" 'd["data"]["membership"]["id"]'): $(json "$WORK/answer.json" 'd["data"]["membership"]["status"]')"
BOB_TOKEN="$(json "$WORK/answer.json" 'd["data"].get("access_token") or ""')"
if [[ -z "$BOB_TOKEN" ]]; then
  call auth/login "{\"email\": \"$BOB\", \"password\": \"$PASSWORD\"}"
  BOB_TOKEN="$(json "$WORK/answer.json" 'd["data"]["access_token"]')"
fi

step "8. A webhook receiver on loopback, verifying with the official standardwebhooks package"
if [[ ! -x "$VENV/bin/python" ]] || ! "$VENV/bin/python" -c 'import standardwebhooks' 2>/dev/null; then
  echo "   installing standardwebhooks into $VENV (pip)"
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install --quiet standardwebhooks || fail "pip install standardwebhooks"
fi
"$VENV/bin/python" "$ROOT/docs/webhook_receiver.py" --port-file "$WORK/port" \
  --secret-file "$WORK/secret" --events "$WORK/events.jsonl" &
RECEIVER_PID=$!
for _ in $(seq 50); do [[ -s "$WORK/port" ]] && break; sleep 0.1; done
[[ -s "$WORK/port" ]] || fail "the receiver did not start"
ENDPOINT="http://127.0.0.1:$(cat "$WORK/port")/iam-events"

step "9. Alice registers a client (a backend service of the app) with that endpoint"
call clients/create "{\"name\": \"billing-service\", \"endpoint\": \"$ENDPOINT\",
  \"tags\": [], \"meta\": {\"schema_version\": \"1\"}}" "$ALICE_TOKEN" "$SLUG"
CLIENT_ID="$(json "$WORK/answer.json" 'd["data"]["id"]')"
CLIENT_SECRET="$(json "$WORK/answer.json" 'd["data"]["secret"]')"
# The secret is shown here and by clients/regenerate-secret only: store it. The receiver takes it as is.
printf '%s' "$CLIENT_SECRET" > "$WORK/secret"
echo "   client $CLIENT_ID, secret ${CLIENT_SECRET:0:10}... -> $ENDPOINT"

step "10. The client validates Bob's token"
VALIDATE="{\"client_id\": \"$CLIENT_ID\", \"client_secret\": \"$CLIENT_SECRET\", \"token\": \"$BOB_TOKEN\", \"permission\": \"invoices:write\"}"
call clients/validate "$VALIDATE"
[[ "$(json "$WORK/answer.json" 'd["data"]["authorized"]')" == True ]] \
  || fail "Bob not authorized: $(json "$WORK/answer.json" 'd["data"]["reason"]')"
echo "   authorized; roles $(json "$WORK/answer.json" 'd["data"]["roles"]'), permissions $(json "$WORK/answer.json" 'd["data"]["permissions"]')"
echo "   invoices:write allowed: $(json "$WORK/answer.json" 'd["data"]["allowed"]')"
[[ "$(json "$WORK/answer.json" 'd["data"]["allowed"]')" == False ]] || fail "invoices:write allowed before the change"

step "11. Alice gives the role invoices:write; the receiver gets the verified role.updated push"
call roles/update "{\"id\": \"$ROLE_ID\", \"permission_ids\": [\"$READ_ID\", \"$WRITE_ID\"]}" "$ALICE_TOKEN" "$SLUG"
python3 - "$WORK/events.jsonl" "$ROLE_ID" "$BOB_ID" <<'PY' || fail "no verified role.updated push"
import json, pathlib, sys, time

events, role_id, bob_id = pathlib.Path(sys.argv[1]), sys.argv[2], sys.argv[3]
deadline = time.monotonic() + 30
while time.monotonic() < deadline:
    for line in events.read_text().splitlines() if events.exists() else []:
        event = json.loads(line)["event"]
        if event["type"] == "role.updated" and event["data"]["resource"]["id"] == role_id:
            assert bob_id in event["data"]["account_ids"], event
            print(f"   verified push {event['id']}: role.updated for accounts {event['data']['account_ids']}")
            sys.exit(0)
    time.sleep(0.2)
sys.exit("   no verified role.updated within 30 s")
PY
call clients/validate "$VALIDATE"
echo "   invoices:write allowed now: $(json "$WORK/answer.json" 'd["data"]["allowed"]')"
[[ "$(json "$WORK/answer.json" 'd["data"]["allowed"]')" == True ]] || fail "invoices:write not allowed after the change"

step "Done: every step passed."
