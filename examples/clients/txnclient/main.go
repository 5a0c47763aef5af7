// Command chaos-txnclient is the client of the transactional examples: it
// keeps one connection to PostgreSQL and runs list-append transactions
// (Elle's workload: each transaction appends unique values to, and reads,
// a few of a small set of lists) at the isolation level it is given, and
// logs each transaction to the instance's operation history
// ($CHAOS_HISTORY, f txn, see docs/checkers.md), until the flow's stop
// node creates $CHAOS_STOP_FILE. It speaks PostgreSQL's simple query
// protocol itself (trust authentication), so it needs nothing but the
// standard library.
//
//	chaos-txnclient [-addr A] [-isolation "read committed"|"repeatable read"|serializable] [-keys 6] [-for 60s]
//
// A list is a row (k, v) of the table txn_lists, v the elements joined by
// commas; an append is an upsert that concatenates, a read selects v. A
// transaction is ok when its COMMIT was acknowledged, fail when PostgreSQL
// answered with an error (it rolled the transaction back: a serialization
// failure, a deadlock) or the connection could not be made, and info when
// the connection broke after the transaction was sent.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/chaos-harness/chaos/examples/clients/internal/pgwire"
)

func main() {
	addr := flag.String("addr", os.Getenv("DB_ADDR"), "the server's unix socket (a path) or host:port; $VARS are expanded")
	isolation := flag.String("isolation", "serializable", `"read committed", "repeatable read" or serializable`)
	keys := flag.Int("keys", 6, "how many lists")
	limit := flag.Duration("for", 60*time.Second, "stop after this long")
	flag.Parse()
	switch *isolation {
	case "read committed", "repeatable read", "serializable":
	default:
		fmt.Fprintf(os.Stderr, "chaos-txnclient: unknown -isolation %q\n", *isolation)
		os.Exit(2)
	}
	if err := run(os.ExpandEnv(*addr), *isolation, *keys, *limit); err != nil {
		fmt.Fprintln(os.Stderr, "chaos-txnclient:", err)
		os.Exit(1)
	}
}

// definite marks an error after which the transaction certainly did not
// commit.
type definite struct{ error }

func run(addr, isolation string, keys int, limit time.Duration) error {
	if addr == "" {
		return errors.New("no address: give -addr or set DB_ADDR")
	}
	hist, err := os.OpenFile(os.Getenv("CHAOS_HISTORY"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil && os.Getenv("CHAOS_HISTORY") != "" {
		return err
	}
	// Values are unique across instances: a random prefix, then a count.
	prefix := rand.Int64N(1<<20) << 20
	count := int64(0)
	end := time.Now().Add(limit)
	db := &pg{addr: addr}
	defer db.close()
	for time.Now().Before(end) && !stopRequested() {
		var mops [][]any
		for n := 1 + rand.IntN(4); n > 0; n-- {
			k := rand.IntN(keys)
			if rand.IntN(2) == 0 {
				count++
				mops = append(mops, []any{"append", k, prefix | count})
			} else {
				mops = append(mops, []any{"r", k, nil})
			}
		}
		logLine(hist, "invoke", mops, "")
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		done, err := db.txn(ctx, isolation, mops)
		cancel()
		switch {
		case err == nil:
			logLine(hist, "ok", done, "")
		case isDefinite(err):
			logLine(hist, "fail", mops, err.Error())
			time.Sleep(10 * time.Millisecond)
		default:
			logLine(hist, "info", mops, err.Error())
			db.close()
			time.Sleep(50 * time.Millisecond)
		}
	}
	return nil
}

func isDefinite(err error) bool {
	var d definite
	return errors.As(err, &d)
}

func stopRequested() bool {
	p := os.Getenv("CHAOS_STOP_FILE")
	if p == "" {
		return false
	}
	_, err := os.Stat(p)
	return err == nil
}

// logLine appends one history line, with one write so a line is whole even
// if the client is killed.
func logLine(f *os.File, typ string, mops [][]any, errText string) {
	if f == nil {
		return
	}
	line := map[string]any{"process": 0, "type": typ, "f": "txn", "value": mops, "ts": json.Number(strconv.FormatFloat(float64(time.Now().UnixMicro())/1e6, 'f', 6, 64))}
	if errText != "" {
		line["error"] = errText
	}
	b, _ := json.Marshal(line)
	f.Write(append(b, '\n'))
}

// txn runs the transaction as one simple query (BEGIN ... COMMIT) and fills
// in what its reads returned. Each read is a SELECT that returns exactly one
// row, so the rows come back in the order of the reads.
func (d *pg) txn(ctx context.Context, isolation string, mops [][]any) ([][]any, error) {
	var sql strings.Builder
	fmt.Fprintf(&sql, "BEGIN ISOLATION LEVEL %s;", strings.ToUpper(isolation))
	for _, m := range mops {
		if m[0] == "append" {
			fmt.Fprintf(&sql, " INSERT INTO txn_lists AS t VALUES (%d, '%d') ON CONFLICT (k) DO UPDATE SET v = t.v || ',' || EXCLUDED.v;", m[1], m[2])
		} else {
			fmt.Fprintf(&sql, " SELECT coalesce((SELECT v FROM txn_lists WHERE k = %d), '');", m[1])
		}
	}
	sql.WriteString(" COMMIT;")
	rows, err := d.query(ctx, sql.String())
	if err != nil {
		if isDefinite(err) && d.conn != nil {
			// An error rolled the transaction back; leave no block open.
			d.query(ctx, "ROLLBACK")
		}
		return nil, err
	}
	out := make([][]any, len(mops))
	r := 0
	for i, m := range mops {
		out[i] = []any{m[0], m[1], m[2]}
		if m[0] != "r" {
			continue
		}
		if r >= len(rows) {
			return nil, fmt.Errorf("%d rows for %d reads", len(rows), r+1)
		}
		l := []int64{}
		for _, e := range strings.Split(rows[r], ",") {
			if e == "" {
				continue
			}
			n, err := strconv.ParseInt(e, 10, 64)
			if err != nil {
				return nil, fmt.Errorf("read %q: %v", rows[r], err)
			}
			l = append(l, n)
		}
		out[i][2] = l
		r++
	}
	return out, nil
}

// ---- PostgreSQL (simple query protocol, trust authentication: pgwire) ----

type pg struct {
	addr string
	conn *pgwire.Conn
}

func (d *pg) close() {
	if d.conn != nil {
		d.conn.Close()
		d.conn = nil
	}
}

// query runs sql and returns its rows' first columns; a server error is
// definite (PostgreSQL rolled the transaction back), as is a connection
// that could not be made.
func (d *pg) query(ctx context.Context, sql string) ([]string, error) {
	if d.conn == nil {
		c, err := pgwire.Dial(ctx, d.addr)
		if err != nil {
			return nil, definite{err}
		}
		d.conn = c
		if _, err := d.query(ctx, "CREATE TABLE IF NOT EXISTS txn_lists (k int PRIMARY KEY, v text NOT NULL)"); err != nil && !strings.Contains(err.Error(), "23505") {
			return nil, err
		}
	}
	rows, err := d.conn.Query(ctx, sql)
	var serr *pgwire.ServerError
	if errors.As(err, &serr) {
		return rows, definite{err}
	}
	return rows, err
}
