package runner

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/indoubt/indoubt/checker"
)

// exec's --final-sql on a store that speaks PostgreSQL's protocol (the finalSQL of its
// row): the rows of the user's query, read on the server directly once the program has
// ended, become the final read of the history's model.

// queryFinal runs query on the server at dsn and returns its rows as the model's final
// read: exactly-once and bank, rows of (name, integer) as one object; budget and
// counter, one row of one integer as {"balance":n} or {"value":n}.
func queryFinal(ctx context.Context, dsn, query, model string) (json.RawMessage, error) {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return nil, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	rows, err := conn.Query(ctx, query, pgx.QueryExecModeSimpleProtocol)
	if err != nil {
		return nil, fmt.Errorf("--final-sql: %v", err)
	}
	defer rows.Close()
	var pairs [][]any
	for rows.Next() {
		vs, err := rows.Values()
		if err != nil {
			return nil, fmt.Errorf("--final-sql: %v", err)
		}
		pairs = append(pairs, vs)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("--final-sql: %v", err)
	}
	switch model {
	case checker.ExactlyOnceModel, checker.BankModel:
		state := map[string]int64{}
		for _, vs := range pairs {
			if len(vs) != 2 {
				return nil, fmt.Errorf("--final-sql: the %s model's final read is rows of two columns (name, integer); the query gave %d", model, len(vs))
			}
			n, ok := integer(vs[1])
			if !ok {
				return nil, fmt.Errorf("--final-sql: the second column is not an integer (%v)", vs[1])
			}
			state[textOf(vs[0])] += n
		}
		return json.Marshal(state)
	case "budget", "counter":
		if len(pairs) != 1 || len(pairs[0]) != 1 {
			return nil, fmt.Errorf("--final-sql: the %s model's final read is one row of one integer; the query gave %d rows", model, len(pairs))
		}
		n, ok := integer(pairs[0][0])
		if !ok {
			return nil, fmt.Errorf("--final-sql: the value is not an integer (%v)", pairs[0][0])
		}
		key := "balance"
		if model == "counter" {
			key = "value"
		}
		return json.Marshal(map[string]int64{key: n})
	case "":
		return nil, fmt.Errorf("--final-sql: the history names no model to map the rows to: give --model")
	}
	return nil, fmt.Errorf("--final-sql: the %s model has no final read from rows", model)
}

// integer reads a column's value as an integer: any integer type, a numeric (sum()
// gives one) or a float without a fraction.
func integer(v any) (int64, bool) {
	switch x := v.(type) {
	case int64:
		return x, true
	case int32:
		return int64(x), true
	case int16:
		return int64(x), true
	case int8:
		return int64(x), true
	case float64:
		return int64(x), float64(int64(x)) == x
	case pgtype.Numeric:
		i, err := x.Int64Value()
		return i.Int64, err == nil && i.Valid
	case string:
		n, err := strconv.ParseInt(x, 10, 64)
		return n, err == nil
	}
	return 0, false
}

// textOf reads a column's value as a name: text as it is, a UUID in its usual form,
// anything else as Go prints it.
func textOf(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case [16]byte:
		return fmt.Sprintf("%x-%x-%x-%x-%x", x[0:4], x[4:6], x[6:8], x[8:10], x[10:16])
	}
	return fmt.Sprint(v)
}
