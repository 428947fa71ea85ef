package sqlstore

import (
	"reflect"
	"strconv"
	"testing"
)

// numbered is a dialect of $n placeholders and array parameters;
// positional one of ? and a parameter per list value.
type numbered struct{ arrays bool }

func (numbered) Arg(n int) string            { return "$" + strconv.Itoa(n) }
func (d numbered) Arrays() bool              { return d.arrays }
func (numbered) NoRows(error) bool           { return false }
func (numbered) Err(_ string, e error) error { return e }

type positional struct{ numbered }

func (positional) Arg(int) string { return "?" }

func TestRebindNumbersPlaceholdersInOrder(t *testing.T) {
	q := "SELECT a FROM t WHERE b = ? AND c > ? LIMIT ?"
	if got, want := Rebind(numbered{}, q), "SELECT a FROM t WHERE b = $1 AND c > $2 LIMIT $3"; got != want {
		t.Fatalf("Rebind = %q, want %q", got, want)
	}
	if got := Rebind(positional{}, q); got != q {
		t.Fatalf("positional Rebind changed %q to %q", q, got)
	}
}

func TestWhereListsByDialect(t *testing.T) {
	ids := []string{"a", "b", "c"}
	w := NewWhere(numbered{arrays: true})
	w.Cond("x > " + w.Arg(int64(1)))
	w.In("id", ids)
	if got, want := w.Clause(), " WHERE x > $1 AND id = ANY($2)"; got != want {
		t.Fatalf("array clause = %q, want %q", got, want)
	}
	if got, want := w.Args(), []any{int64(1), ids}; !reflect.DeepEqual(got, want) {
		t.Fatalf("array args = %v, want %v", got, want)
	}
	w = NewWhere(positional{})
	w.In("id", ids)
	if got, want := w.Clause(), " WHERE id IN (?, ?, ?)"; got != want {
		t.Fatalf("list clause = %q, want %q", got, want)
	}
	if got, want := w.Args(), []any{"a", "b", "c"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("list args = %v, want %v", got, want)
	}
	if got := NewWhere(positional{}).Clause(); got != "" {
		t.Fatalf("empty clause = %q, want none", got)
	}
}
