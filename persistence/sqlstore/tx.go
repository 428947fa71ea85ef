package sqlstore

import "fmt"

// Savepoints is the savepoint half of a persistence.Attempt for a
// transaction whose statements exec runs; rollback is the dialect's
// statement that rolls the command back to its savepoint.
type Savepoints struct {
	exec     func(stmt string) error
	rollback string
}

// NewSavepoints returns the savepoint steps of a transaction.
func NewSavepoints(exec func(stmt string) error, rollback string) Savepoints {
	return Savepoints{exec: exec, rollback: rollback}
}

func (s Savepoints) Savepoint() error           { return s.exec("SAVEPOINT cmd") }
func (s Savepoints) RollbackToSavepoint() error { return s.exec(s.rollback) }
func (s Savepoints) ReleaseSavepoint() error    { return s.exec("RELEASE SAVEPOINT cmd") }

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
