package baseline

import (
	"runtime"
	"sync"
)

// ErrorRecord is the part of an upstream error record the race needs.
type ErrorRecord struct {
	PlanID  string
	Phase   string
	Message string
}

// ErrorHistory ports the upstream ErrorHistory: a plan's error records.
// Its add is one list.append, atomic under the GIL, so it is one locked
// append here.
type ErrorHistory struct {
	PlanID string

	mu      sync.Mutex
	records []ErrorRecord
}

func (h *ErrorHistory) add(r ErrorRecord) {
	h.mu.Lock()
	h.records = append(h.records, r)
	h.mu.Unlock()
}

// ErrorRecoveryService ports ErrorRecoveryService
// (application/services/error_recovery_service.py), a DI singleton shared by
// every plan execution context.
//
// It keeps the seed's defect on purpose: getOrCreateHistory is a check, a
// construction and a set, each atomic on its own (the GIL makes each dict
// operation atomic, so mu guards exactly one map operation at a time), none
// atomic together (seed 003, lines 291–295). Two first errors of one plan
// can both see no history, both create one, and the second set discards
// the first history with the records already added to it.
type ErrorRecoveryService struct {
	// mu stands for the GIL: it is held for one map operation, never
	// across the check and the set.
	mu        sync.Mutex
	histories map[string]*ErrorHistory
}

// NewErrorRecoveryService returns a service with no histories.
func NewErrorRecoveryService() *ErrorRecoveryService {
	return &ErrorRecoveryService{histories: make(map[string]*ErrorHistory)}
}

// getOrCreateHistory mirrors _get_or_create_history:
//
//	if plan_id not in self._histories:
//	    self._histories[plan_id] = ErrorHistory(plan_id=plan_id)
//	return self._histories[plan_id]
func (s *ErrorRecoveryService) getOrCreateHistory(planID string) *ErrorHistory {
	s.mu.Lock()
	_, ok := s.histories[planID] // plan_id not in self._histories
	s.mu.Unlock()
	if !ok {
		// ErrorHistory(plan_id=plan_id) runs Python code (a dataclass
		// __init__) between the check and the set; CPython may switch
		// threads there. Gosched stands for that switch point; it widens
		// nothing the Python code does not have.
		runtime.Gosched()
		h := &ErrorHistory{PlanID: planID}
		s.mu.Lock()
		s.histories[planID] = h // self._histories[plan_id] = ...
		s.mu.Unlock()
	}
	s.mu.Lock()
	h := s.histories[planID] // return self._histories[plan_id]
	s.mu.Unlock()
	return h
}

// RecordError mirrors record_error: fetch the history (line 130), classify
// the error, and add the record to the history fetched (line 154). A record
// added to a history that another caller's set has since replaced is lost.
func (s *ErrorRecoveryService) RecordError(planID, phase, message string) {
	h := s.getOrCreateHistory(planID)
	// Classification, retry counting and hint lookup happen here upstream;
	// they read the history but do not change which history is used.
	h.add(ErrorRecord{PlanID: planID, Phase: phase, Message: message})
}

// History returns the plan's recorded errors, as `agents plan errors`
// would show them.
func (s *ErrorRecoveryService) History(planID string) []ErrorRecord {
	s.mu.Lock()
	h := s.histories[planID]
	s.mu.Unlock()
	if h == nil {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]ErrorRecord(nil), h.records...)
}
