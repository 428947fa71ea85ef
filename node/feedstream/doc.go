// Package feedstream serves the live feeds (actors/feed) over gRPC, within
// a byte budget: what the tails of a node hold at once — the pages read for
// them and not yet sent, and the events their transport keeps until the
// clients' HTTP/2 flow control lets them out — is bounded node-wide
// (Limits.TotalBytes) and per client connection (Limits.ConnBytes), and a
// tail whose client stops reading ends after Limits.StallTimeout.
//
// grpc's Send returns once a message is queued in the transport, so a
// stream whose client does not read keeps what it sent there, and blocks
// only on the next one: three pages of a tail that never reads. With 1 MiB
// messages, 300 such tails held a gigabyte (issue 26). The encoded events
// are tracked (node/codec.Tracked) from the send until the transport
// writes or drops them, and that is what holds room; a stream waiting for
// room holds nothing (it drops the page and rewinds its tail). So a client
// that never reads holds its connection's room at most, and the others'
// tails keep theirs.
package feedstream
