package sqlstore

import "fmt"

// StatementTx runs a statement of a transaction's own.
type StatementTx interface {
	ExecStatement(stmt string) error
}

// Savepoints is the savepoint half of a persistence.Attempt for the
// transaction tx; rollback is the dialect's statement that rolls the
// command back to its savepoint.
type Savepoints struct {
	tx       StatementTx
	rollback string
}

// NewSavepoints returns the savepoint steps of a transaction.
func NewSavepoints(tx StatementTx, rollback string) Savepoints {
	return Savepoints{tx: tx, rollback: rollback}
}

func (s Savepoints) Savepoint() error           { return s.tx.ExecStatement("SAVEPOINT cmd") }
func (s Savepoints) RollbackToSavepoint() error { return s.tx.ExecStatement(s.rollback) }
func (s Savepoints) ReleaseSavepoint() error    { return s.tx.ExecStatement("RELEASE SAVEPOINT cmd") }

// Migrate brings a schema at version to len(migrations), inside the
// caller's transaction: run applies one migration's statements, record
// (when not nil) notes the version reached after each. It returns how many
// it applied, and refuses a schema newer than this build knows (schema
// names it in the error).
func Migrate(schema string, version int, migrations []string, run func(stmt string) error, record func(version int) error) (int, error) {
	if version > len(migrations) {
		return 0, fmt.Errorf("%s version %d is newer than this build knows (%d)", schema, version, len(migrations))
	}
	for v := version; v < len(migrations); v++ {
		if err := run(migrations[v]); err != nil {
			return 0, fmt.Errorf("migration %d: %w", v+1, err)
		}
		if record == nil {
			continue
		}
		if err := record(v + 1); err != nil {
			return 0, err
		}
	}
	return len(migrations) - version, nil
}
