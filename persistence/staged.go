package persistence

import sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"

// SessionStateStaged marks a session that is being imported in pieces
// (session.Service.ImportFrom). A staged session is stored like any other —
// CreateSession with this State, its messages by AppendMessages — but no
// read shows it: GetSession is NOT_FOUND, ListSessions leaves it out unless
// its filter asks for this state (the importer's cleanup does), and
// ListMessages returns nothing of it. So its messages can be written in many
// bounded transactions and the session appears, complete, in the one that
// sets its state to active (UpdateSession). It is never a protobuf value:
// it does not leave the store.
const SessionStateStaged sessionv1.SessionState = -1
