#!/usr/bin/env python3
"""A set of integers in one SQLite table, with a history for the set check.

  sqlite-set.py add DB SYNC SECONDS   insert 1, 2, 3, ... one commit each
  sqlite-set.py read DB               read every element once

Each operation is logged to $CHAOS_HISTORY (docs/checkers.md): an add is
"ok" once COMMIT returned, "info" when COMMIT failed (SQLite may or may not
have kept it), "fail" when the INSERT itself failed before the commit.
The writer prints "acked 10" once ten adds were acknowledged (the
experiments' ready marker: the fault comes after it, so there is always
something acknowledged for it to take). SQLite's automatic checkpoints are
off: the writer checkpoints once, when the flow asks it to stop (as a
shutdown would), then ends without closing its connection, as a crash
would, so the reader recovers the database from what its files hold, as
after a power loss. (With automatic checkpoints a fault that began just
after one found the WAL to be restarted, so every commit under it failed
syncing the new WAL header and nothing acknowledged was at risk: the
planted weakness passed, about one run in three.) The writer stops when
the flow asks ($CHAOS_EXPERIMENT_WORKLOAD_INSTANCE_OUTPUT_DIR/.chaos/stop)
or after SECONDS.
"""
import json
import os
import sqlite3
import sys
import time

hist = open(os.environ["CHAOS_HISTORY"], "a", buffering=1)
proc = int(os.environ.get("CHAOS_INSTANCE_INDEX", "0"))
stop = os.path.join(os.environ.get("CHAOS_EXPERIMENT_WORKLOAD_INSTANCE_OUTPUT_DIR", "."), ".chaos", "stop")


def log(typ, f, value, error=None):
    e = {"process": proc, "type": typ, "f": f, "value": value, "ts": time.time()}
    if error:
        e["error"] = error
    hist.write(json.dumps(e) + "\n")


def add(db, sync, seconds):
    con = sqlite3.connect(db, isolation_level=None, timeout=10)
    con.execute("PRAGMA journal_mode=WAL")
    con.execute("PRAGMA synchronous=" + sync)
    # No automatic checkpoint: the one at the stop is the WAL's sync
    # (with synchronous=NORMAL, the only one after the WAL's header).
    con.execute("PRAGMA wal_autocheckpoint=0")
    con.execute("CREATE TABLE IF NOT EXISTS s(v INTEGER PRIMARY KEY)")
    # The table itself is made durable before the first add, so a lost
    # write-back takes adds, not the table.
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    end = time.time() + seconds
    v = proc * 1000000
    acked = 0
    while time.time() < end and not os.path.exists(stop):
        v += 1
        log("invoke", "add", v)
        try:
            con.execute("BEGIN")
            con.execute("INSERT INTO s VALUES (?)", (v,))
        except sqlite3.Error as e:
            log("fail", "add", v, str(e))
            try:
                con.execute("ROLLBACK")
            except sqlite3.Error:
                pass
            continue
        try:
            con.execute("COMMIT")
            log("ok", "add", v)
            acked += 1
            if acked == 10:
                print("acked 10", flush=True)
        except sqlite3.Error as e:
            log("info", "add", v, str(e))
            try:
                con.execute("ROLLBACK")
            except sqlite3.Error:
                pass
        time.sleep(0.005)
    try:
        con.execute("PRAGMA wal_checkpoint(PASSIVE)")
        print("checkpointed", flush=True)
    except sqlite3.Error as e:
        print("checkpoint failed:", e, flush=True)
    hist.flush()
    # No close: a clean close would checkpoint again and remove the WAL; a
    # crash does neither.
    os._exit(0)


def read(db):
    for _ in range(100):
        log("invoke", "read", None)
        try:
            con = sqlite3.connect(db, timeout=10)
            vals = [r[0] for r in con.execute("SELECT v FROM s ORDER BY v")]
            con.close()
            log("ok", "read", vals)
            return
        except sqlite3.Error as e:
            log("fail", "read", None, str(e))
            time.sleep(0.2)
    sys.exit(1)


if __name__ == "__main__":
    if sys.argv[1] == "add":
        add(sys.argv[2], sys.argv[3], float(sys.argv[4]))
    elif sys.argv[1] == "read":
        read(sys.argv[2])
    else:
        sys.exit("usage: sqlite-set.py add DB SYNC SECONDS | read DB")
