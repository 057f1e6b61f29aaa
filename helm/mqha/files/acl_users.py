"""The chart's ACL hook Job (README "Users and policies"; run as ``python3 -c <this file>``).

After each install and upgrade it makes the controllers' ACL book hold, with mqadmin:

- the admin user, ``MQHA_INIT_USER`` (``auth.initAuthenticationUser``), as a Super user;
- every user of ``MQHA_ACL_USERS`` (``acl.users``' Secret: one line of JSON,
  ``[{"username": ..., "password": ..., "userType": "Normal"|"Super"}, ...]``; userType defaults to
  Normal), created, or updated when it exists (password and type);
- every policy of ``MQHA_ACL_POLICIES`` (``acl.policies``: ``[{"subject": "User:NAME", "resources":
  [...], "actions": [...], "decision": "Allow"|"Deny", "sourceIps": [...]}]``) with createAcl, which
  replaces the entries of the resources it names.

``MQHA_CONTROLLERS`` (mqadmin -n), ``MQHA_CLUSTER`` (-c), ``MQHA_ADMIN_TOKEN`` (read by mqadmin),
``MQHA_DEADLINE`` (seconds for the whole Job, default 600), ``MQHA_RETRY_PAUSE`` (default 5). Each
change is tried again until the deadline (the controllers may still be starting), so the Job is
idempotent: a second run changes nothing. Users not listed are left alone (delete them with mqadmin).
"""

import json
import os
import subprocess
import sys
import time

DEADLINE = time.monotonic() + float(os.environ.get("MQHA_DEADLINE", "600"))
PAUSE = float(os.environ.get("MQHA_RETRY_PAUSE", "5"))


def fail(message):
    sys.exit(f"acl_users.py: {message}")


def parsed(name, default):
    text = os.environ.get(name, "").strip()
    if not text:
        return default
    try:
        return json.loads(text)
    except ValueError as exc:
        fail(f"{name} is not JSON: {exc}")


def mqadmin(command, *options):
    args = ["mqadmin", command, "-n", os.environ["MQHA_CONTROLLERS"], "-c", os.environ["MQHA_CLUSTER"]]
    return subprocess.run([*args, *options], capture_output=True, text=True, check=False)


def apply(what, *attempts):
    """Run the first of ``attempts`` (mqadmin argument lists) that succeeds, retrying until the deadline."""
    while True:
        errors = []
        for attempt in attempts:
            result = mqadmin(*attempt)
            if result.returncode == 0:
                print(f"{what}: {attempt[0]} done", flush=True)
                return
            errors.append(f"{attempt[0]}: {(result.stderr or result.stdout).strip()}")
        if time.monotonic() + PAUSE > DEADLINE:
            fail(f"{what}: " + "; ".join(errors))
        time.sleep(PAUSE)


def users():
    found = []
    admin = parsed("MQHA_INIT_USER", None)
    if admin is not None:
        found.append({"username": admin["username"], "password": admin["password"], "userType": "Super"})
    listed = parsed("MQHA_ACL_USERS", [])
    if not isinstance(listed, list):
        fail("MQHA_ACL_USERS must be a JSON list of users")
    for user in listed:
        if not isinstance(user, dict) or not user.get("username") or not user.get("password"):
            fail("each user of MQHA_ACL_USERS needs a username and a password")
        found.append({"userType": "Normal", **user})
    return found


def main():
    for user in users():
        options = ["-u", user["username"], "-p", user["password"], "-t", user["userType"]]
        apply(f"user {user['username']}", ["createUser", *options], ["updateUser", *options])
    for policy in parsed("MQHA_ACL_POLICIES", []):
        options = [
            "-s", policy["subject"],
            "-r", ",".join(policy["resources"]),
            "-a", ",".join(policy["actions"]),
            "-d", policy.get("decision", "Allow"),
        ]
        if policy.get("sourceIps"):
            options += ["-i", ",".join(policy["sourceIps"])]
        apply(f"policy of {policy['subject']}", ["createAcl", *options])


main()
