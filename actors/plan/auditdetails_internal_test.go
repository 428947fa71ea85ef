package plan

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/agentstate/agentstate/actors/audit"
	auditv1 "github.com/agentstate/agentstate/messages/agentstate/audit/v1"
)

// writeOf builds its audit entries with audit.NewOwnEntry, which stores
// the details as given: that is right only while the details it marshals
// are what audit.NewEntry would store anyway — compact, and without a key
// whose value it masks. This holds for any values: the keys are the
// structs' fixed JSON names. Checked here for every details type writeOf
// uses, with values that would trip a text-based pre-filter ("token",
// "password" in values, quotes, control characters, non-ASCII).
func TestOwnAuditDetailsNeedNoMasking(t *testing.T) {
	odd := "password token \"api_key\" \n\t\\ é 日本 \u2028"
	for _, d := range []any{
		errorAudit{RecordID: odd, Sequence: 7, Phase: odd, StepID: odd, ErrorType: "TokenExpired", Tool: odd,
			Category: odd, RetryCount: 2, MaxRetries: 3, RecoveryAction: odd},
		errorAudit{},
		resetAudit{Phase: odd, StepID: odd, PreviousRetryCount: 4},
		map[string]int32{"max_retries": 5},
	} {
		raw, err := json.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		req := &auditv1.RecordRequest{EventType: audit.EventPlanErrorRecorded, PlanId: "p1", DetailsJson: string(raw)}
		checked, err := audit.NewEntry(req, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		own, err := audit.NewOwnEntry(req, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if own.DetailsJson != checked.DetailsJson {
			t.Fatalf("%T: NewOwnEntry stores %s, NewEntry %s", d, own.DetailsJson, checked.DetailsJson)
		}
		if typ := reflect.TypeOf(d); typ.Kind() == reflect.Struct {
			for i := 0; i < typ.NumField(); i++ {
				key, _, _ := strings.Cut(typ.Field(i).Tag.Get("json"), ",")
				if audit.IsSecretKey(key) {
					t.Fatalf("%s.%s: key %q is a secret key, whose value NewEntry masks", typ.Name(), typ.Field(i).Name, key)
				}
			}
		}
	}
}
