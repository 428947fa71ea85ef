package sqlstore

import (
	"context"
	"strings"
)

// Dialect is the statement text in which the stores differ.
type Dialect interface {
	// Arg is the placeholder of a statement's nth parameter (from 1).
	Arg(n int) string
	// Arrays reports whether one parameter may carry a list (PostgreSQL's
	// "= ANY($n)"); otherwise a list takes a parameter per value.
	Arrays() bool
	// NoRows tells the error of a QueryRow that found no row.
	NoRows(err error) bool
	// Err classifies a failure of a read in op (the store's error
	// mapping).
	Err(op string, err error) error
}

// DB runs statements: a store's read pool, or its writer's transaction.
type DB interface {
	Dialect
	// Query runs query and, for each row, scans it into dest and calls row.
	Query(ctx context.Context, query string, args, dest []any, row func() error) error
	// QueryRow scans the first row of query into dest.
	QueryRow(ctx context.Context, query string, args, dest []any) error
}

// Where collects a statement's conditions and their parameters, numbered
// in the dialect's way.
type Where struct {
	d     Dialect
	conds []string
	args  []any
}

// NewWhere starts an empty condition list for d.
func NewWhere(d Dialect) *Where { return &Where{d: d} }

// Arg adds a parameter and returns its placeholder.
func (w *Where) Arg(v any) string {
	w.args = append(w.args, v)
	return w.d.Arg(len(w.args))
}

// Cond adds a condition.
func (w *Where) Cond(c string) { w.conds = append(w.conds, c) }

// In adds the condition that column is one of values (not empty).
func (w *Where) In(column string, values []string) {
	if w.d.Arrays() {
		w.Cond(column + " = ANY(" + w.Arg(values) + ")")
		return
	}
	ph := make([]string, len(values))
	for i, v := range values {
		ph[i] = w.Arg(v)
	}
	w.Cond(column + " IN (" + strings.Join(ph, ", ") + ")")
}

// Clause is " WHERE " and the conditions joined by AND, or "".
func (w *Where) Clause() string {
	if len(w.conds) == 0 {
		return ""
	}
	return " WHERE " + strings.Join(w.conds, " AND ")
}

// Args returns the parameters added so far.
func (w *Where) Args() []any { return w.args }
